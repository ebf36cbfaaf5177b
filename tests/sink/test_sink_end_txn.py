"""A batch's EndTxns, the pure part: grouping by coordinator, send order, EndTxn versions and
what each transaction's outcome says. The requests themselves run on real brokers in
``integration_tests/sink/test_commit_concurrency.py``."""

from __future__ import annotations

import kafka.errors as Errors
import pytest
from kafka.protocol.metadata import ApiVersionsResponse
from kafka.protocol.producer.transaction import EndTxnRequest, EndTxnResponse

from connectors.kafka.end_txn import (
    EndTxnCall,
    EndTxnOutcome,
    EndTxnResult,
    EndTxnTarget,
    end_txn_version,
)
from connectors.kafka.txn_coordinators import (
    EPOCH_BUMP_END_TXN_VERSION,
    CoordinatorAnswer,
    group_by_coordinator,
    max_versions,
    send_order,
)

TARGET = EndTxnTarget("orders-1f2e3d4c-3-0", 4001, 7)


def test_ids_are_grouped_by_coordinator_in_the_order_given() -> None:
    pairs = [("q-0", 2), ("q-1", 1), ("q-2", 2), ("q-3", 3), ("q-4", 1)]
    assert group_by_coordinator(pairs) == {2: ["q-0", "q-2"], 1: ["q-1", "q-4"], 3: ["q-3"]}


def test_ids_that_never_failed_are_sent_before_retries() -> None:
    # q-1 and q-3 belong to a coordinator that was killed: they go last, fewest failures first.
    order = ["q-0", "q-1", "q-2", "q-3", "q-4"]
    failures = {"q-3": 1, "q-1": 4, "q-4": 0, "q-0": 0, "q-2": 0}
    assert send_order(failures, order) == ["q-0", "q-2", "q-4", "q-3", "q-1"]


def _api_versions(end_txn_max: int, error_code: int = 0) -> ApiVersionsResponse:
    return ApiVersionsResponse(
        error_code=error_code,
        api_keys=[
            ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=4),
            ApiVersionsResponse.ApiVersion(
                api_key=EndTxnRequest.API_KEY, min_version=0, max_version=end_txn_max
            ),
        ],
    )


@pytest.mark.parametrize(
    ("broker_max", "sent", "bumps"),
    [(3, 3, False), (4, 4, False), (5, 5, True), (99, EndTxnRequest.max_version, True)],
    ids=["kafka-3.x-old", "kafka-3.9", "kafka-4.x", "newer-than-kafka-python"],
)
def test_each_coordinator_gets_the_end_txn_version_it_speaks(
    broker_max: int, sent: int, bumps: bool
) -> None:
    versions = max_versions(_api_versions(broker_max))
    assert end_txn_version(versions) == sent
    assert (end_txn_version(versions) >= EPOCH_BUMP_END_TXN_VERSION) is bumps
    (request, covered), *_ = EndTxnCall({TARGET.transactional_id: TARGET}, True).requests(
        [TARGET.transactional_id], versions
    )
    # Pinned to the coordinator's own version, not kafka-python's choice for the connection.
    assert (request.API_VERSION, covered) == (sent, [TARGET.transactional_id])
    assert (request.producer_id, request.producer_epoch, request.committed) == (4001, 7, True)


def test_a_refused_api_versions_probe_names_the_error() -> None:
    with pytest.raises(Errors.UnsupportedVersionError, match="ApiVersions answered"):
        max_versions(_api_versions(5, error_code=Errors.UnsupportedVersionError.errno))


def test_an_end_txn_answer_is_read_per_transactional_id() -> None:
    call = EndTxnCall({TARGET.transactional_id: TARGET}, False)
    response = EndTxnResponse(error_code=Errors.ProducerFencedError.errno)
    assert call.answers(response, [TARGET.transactional_id]) == {
        TARGET.transactional_id: (Errors.ProducerFencedError, None)
    }


def test_an_ended_transaction_has_no_error() -> None:
    outcome = EndTxnOutcome.of(
        TARGET, True, CoordinatorAnswer(Errors.NoError, None, False, "", 2, 1)
    )
    assert (outcome.result, outcome.error, outcome.coordinator_id) == (EndTxnResult.ENDED, None, 2)
    assert str(outcome) == (
        "EndTxn(commit) of orders-1f2e3d4c-3-0 (producer id 4001, epoch 7) ended at coordinator 2"
    )


def test_a_refused_transaction_carries_the_coordinators_answer() -> None:
    answer = CoordinatorAnswer(Errors.InvalidProducerEpochError, coordinator_id=3, attempts=2)
    outcome = EndTxnOutcome.of(TARGET, True, answer)
    assert (outcome.result, outcome.error) == (
        EndTxnResult.REFUSED,
        Errors.InvalidProducerEpochError,
    )
    assert str(outcome).endswith(": coordinator 3 answered InvalidProducerEpochError")


def test_a_timed_out_transaction_carries_the_last_retriable_error_never_success() -> None:
    answer = CoordinatorAnswer(
        Errors.KafkaConnectionError,
        timed_out=True,
        detail="KafkaConnectionError('Connection refused') from broker 2",
        coordinator_id=None,
        attempts=6,
    )
    outcome = EndTxnOutcome.of(TARGET, False, answer)
    assert outcome.result is EndTxnResult.TIMED_OUT and outcome.error is not None
    assert str(outcome) == (
        "EndTxn(abort) of orders-1f2e3d4c-3-0 (producer id 4001, epoch 7) did not finish "
        "before its deadline after 6 attempt(s); last error: KafkaConnectionError: "
        "KafkaConnectionError('Connection refused') from broker 2"
    )
