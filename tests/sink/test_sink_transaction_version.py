"""Which EndTxn version a coordinator gets, and whether the commit oracle expects a bumped
epoch there, from the coordinator's own ApiVersions answer: its EndTxn versions and the
``transaction.version`` it finalized.

Kafka takes an EndTxn's semantics from the request's version alone (v5 is transactions V2: the
epoch moves on at every EndTxn), on any cluster; the finalized ``transaction.version`` picks
the transaction log's record format. A 4.x broker advertises EndTxn v5 at every level, but at
level 0 (a cluster upgraded from 3.x that never finalized the feature) it cannot store a V2
transaction: it answers UNSUPPORTED_VERSION and leaves the transaction wedged (Ongoing,
CONCURRENT_TRANSACTIONS to every later EndTxn, not aborted at its timeout). Seen on Kafka 4.3.1;
the levels 1 and 2 are tested on real brokers in
``integration_tests/sink/test_transaction_version_1.py`` and the V2 suites.
"""

from __future__ import annotations

from typing import Any

import pytest
from kafka.future import Future
from kafka.protocol.metadata import ApiVersionsResponse
from kafka.protocol.producer.transaction import EndTxnRequest

from connectors.kafka.end_txn import (
    EndTxnCall,
    EndTxnTarget,
    end_txn_version,
)
from connectors.kafka.transactions import TransactionAdmin
from connectors.kafka.txn_coordinators import (
    EPOCH_BUMP_END_TXN_VERSION,
    max_versions,
    transaction_version,
    usable_versions,
)

TARGET = EndTxnTarget("orders-1f2e3d4c-3-0", 4001, 7)
ABSENT = None  # the broker names no finalized transaction.version


def _api_versions(end_txn_max: int, tv: int | None) -> ApiVersionsResponse:
    features = [
        ApiVersionsResponse.FinalizedFeatureKey(
            name="metadata.version", min_version_level=30, max_version_level=30
        )
    ]
    if tv is not None:
        features.append(
            ApiVersionsResponse.FinalizedFeatureKey(
                name="transaction.version", min_version_level=tv, max_version_level=tv
            )
        )
    return ApiVersionsResponse(
        error_code=0,
        api_keys=[
            ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=4),
            ApiVersionsResponse.ApiVersion(
                api_key=EndTxnRequest.API_KEY, min_version=0, max_version=end_txn_max
            ),
        ],
        finalized_features=features,
    )


CASES = [
    # (cluster, EndTxn max advertised, finalized transaction.version, EndTxn sent, bumps)
    ("kafka-3.9", 4, ABSENT, 4, False),
    ("kafka-4.x-upgraded-from-3.x-tv0", 5, ABSENT, 4, False),
    ("kafka-4.x-tv0-named", 5, 0, 4, False),
    ("kafka-4.x-tv1", 5, 1, 4, False),
    ("kafka-4.x-tv2", 5, 2, 5, True),
]


@pytest.mark.parametrize(
    ("cluster", "advertised", "tv", "sent", "bumps"), CASES, ids=[c[0] for c in CASES]
)
def test_end_txn_v5_goes_only_to_a_coordinator_that_can_store_it(
    cluster: str, advertised: int, tv: int | None, sent: int, bumps: bool
) -> None:
    response = _api_versions(advertised, tv)
    assert max_versions(response)[EndTxnRequest.API_KEY] == advertised, "what it speaks"
    versions = usable_versions(response)
    assert end_txn_version(versions) == sent, cluster
    assert (end_txn_version(versions) >= EPOCH_BUMP_END_TXN_VERSION) is bumps, cluster
    (request, _), *_ = EndTxnCall({TARGET.transactional_id: TARGET}, True).requests(
        [TARGET.transactional_id], versions
    )
    assert sent == request.API_VERSION, cluster


def test_an_answer_without_finalized_features_is_transaction_version_0() -> None:
    """ApiVersions below v3 carries no features: EndTxn v5 is never risked on such an answer."""
    response = ApiVersionsResponse(
        error_code=0,
        api_keys=[
            ApiVersionsResponse.ApiVersion(
                api_key=EndTxnRequest.API_KEY, min_version=0, max_version=5
            )
        ],
    )
    assert transaction_version(response) == 0
    assert usable_versions(response)[EndTxnRequest.API_KEY] == 4


class _OneAnswerNet:
    """The part of kafka-python's client that an ApiVersions probe uses, answering with one
    response."""

    def __init__(self, response: ApiVersionsResponse) -> None:
        self._response = response
        self.sent_to: list[int | None] = []

    def send(self, node_id: int | None, request: Any) -> Future:
        self.sent_to.append(node_id)
        return Future().success(self._response)

    def poll(self, timeout_ms: int | None = None, future: Future | None = None) -> list[Any]:
        return []


@pytest.mark.parametrize(
    ("cluster", "advertised", "tv", "sent", "bumps"), CASES, ids=[c[0] for c in CASES]
)
def test_the_oracle_expects_a_bump_exactly_where_end_txn_v5_is_sent(
    cluster: str, advertised: int, tv: int | None, sent: int, bumps: bool
) -> None:
    """``epoch_bumps_on_end_at`` (the commit oracle's ``bump_possible``) asks the coordinator
    itself, and agrees with the EndTxn version the committer sends it."""
    admin = object.__new__(TransactionAdmin)  # no connections: the probe is the fake's
    net = _OneAnswerNet(_api_versions(advertised, tv))
    admin._net = net  # type: ignore[assignment]
    admin._request_timeout_s = 5.0
    assert admin.epoch_bumps_on_end_at(3) is bumps, cluster
    assert net.sent_to == [3]
