"""The EndTxn version a coordinator gets comes from an ApiVersions probe of that coordinator.
A probe is good for one round of requests only: if ``transaction.version`` is downgraded to 0
(``kafka-features downgrade``, the rollback of transactions V2) while an id is retried after a
retriable answer (CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR), a
retry sent as v5 would be refused there and wedge the transaction (UNSUPPORTED_VERSION; see
``connectors/kafka/txn_coordinators.py``). Every retry round probes again.

No broker: a fake client plays one coordinator (node 1) whose finalized level drops from 2 to
0 right after it answered the first EndTxn with a retriable error.
"""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import kafka.errors as Errors
import pytest
from kafka.future import Future
from kafka.protocol.metadata import ApiVersionsResponse, FindCoordinatorRequest
from kafka.protocol.producer.transaction import EndTxnRequest

from checkpoint.deadline import Deadline
from connectors.kafka.end_txn import EndTxnCall, EndTxnTarget
from connectors.kafka.txn_coordinators import call_coordinators

TARGET = EndTxnTarget("orders-1f2e3d4c-3-0", 4001, 7)
NODE = 1


def _api_versions(tv: int) -> ApiVersionsResponse:
    features = (
        [
            ApiVersionsResponse.FinalizedFeatureKey(
                name="transaction.version", min_version_level=tv, max_version_level=tv
            )
        ]
        if tv
        else []
    )
    return ApiVersionsResponse(
        error_code=0,
        api_keys=[
            ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=4),
            ApiVersionsResponse.ApiVersion(
                api_key=EndTxnRequest.API_KEY, min_version=0, max_version=5
            ),
        ],
        finalized_features=features,
    )


class _Cluster:
    """The cluster as the coordinator of one id sees it: ``tv`` is its finalized level."""

    def add_coordinator(self, entry: Any, *_: Any, **__: Any) -> int:
        return int(entry.node_id)


class _OneCoordinatorNet:
    """kafka-python's client as :func:`call_coordinators` drives it; every request is answered
    at once. The first EndTxn is answered ``first_error`` and the level then drops to 0."""

    def __init__(self, first_error: int) -> None:
        self.cluster = _Cluster()
        self.tv = 2
        self._first_error: int | None = first_error
        self.end_txns: list[tuple[int, int]] = []  # (version sent, level at the coordinator)

    def least_loaded_node(self) -> int:
        return NODE

    def in_flight_request_count(self, node_id: int | None = None) -> int:
        return 0

    def poll(self, timeout_ms: int | None = None, future: Future | None = None) -> list[Any]:
        time.sleep(min(timeout_ms or 0, 20) / 1000)
        return []

    def send(self, node_id: int | None, request: Any) -> Future:
        if isinstance(request, FindCoordinatorRequest):
            entry = SimpleNamespace(
                key=TARGET.transactional_id, node_id=NODE, host="h", port=9092,
                error_code=0, error_message=None,
            )  # fmt: skip
            return Future().success(SimpleNamespace(coordinators=[entry]))
        if isinstance(request, EndTxnRequest):
            version = request.API_VERSION
            self.end_txns.append((version, self.tv))
            if self._first_error is not None:
                error, self._first_error = self._first_error, None
                self.tv = 0  # the operator's downgrade lands while the id is retried
                return Future().success(SimpleNamespace(error_code=error))
            if version >= 5 and self.tv == 0:
                # What Kafka 4.3.1 does: refuse, and wedge the transaction.
                return Future().success(
                    SimpleNamespace(error_code=Errors.UnsupportedVersionError.errno)
                )
            return Future().success(SimpleNamespace(error_code=0))
        # ApiVersions: the coordinator's own answer, at its level now
        return Future().success(_api_versions(self.tv))


@pytest.mark.parametrize(
    "first_error",
    [
        Errors.ConcurrentTransactionsError.errno,
        Errors.CoordinatorLoadInProgressError.errno,
        Errors.NotCoordinatorError.errno,
    ],
    ids=["CONCURRENT_TRANSACTIONS", "COORDINATOR_LOAD_IN_PROGRESS", "NOT_COORDINATOR"],
)
def test_a_retried_end_txn_is_not_sent_as_v5_to_a_coordinator_now_at_level_0(
    first_error: int,
) -> None:
    net = _OneCoordinatorNet(first_error)
    answers = call_coordinators(
        net,  # type: ignore[arg-type]
        [TARGET.transactional_id],
        EndTxnCall({TARGET.transactional_id: TARGET}, commit=True),
        deadline=Deadline(5),
    )
    assert net.end_txns[0] == (5, 2), "the first EndTxn: v5 at level 2, as it should be"
    at_level_0 = [version for version, tv in net.end_txns[1:] if tv == 0]
    assert at_level_0, net.end_txns
    assert all(v <= 4 for v in at_level_0), (
        f"EndTxn v5 sent to a coordinator at transaction.version 0 (it wedges the "
        f"transaction there); sent (version, level): {net.end_txns}; answer: "
        f"{answers[TARGET.transactional_id]}"
    )
