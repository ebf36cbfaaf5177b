"""The fence's loop (connectors/kafka/fence.py), without a broker: InitProducerId goes out only
while a describe shows the target's epoch current, and is never sent again blindly.

Kafka's coordinator checks the producer id of an InitProducerId but not its epoch while a
transaction is Ongoing, so a repeated fence lands on whatever transaction of that producer id
is open: a newer producer's too (seen on 3.5.2, 3.9.2-nv and 4.4.0). A request whose answer
was lost may have been taken; only a describe tells.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import kafka.errors as Errors
from kafka.future import Future
from kafka.protocol.producer.transaction import InitProducerIdRequest

from checkpoint.deadline import Deadline
from connectors.kafka.end_txn import EndTxnTarget
from connectors.kafka.fence import FenceResult, InitProducerIdCall, fence_all
from connectors.kafka.txn_coordinators import CoordinatorAnswer, call_coordinators
from connectors.kafka.txn_state import TxnDescription, TxnState

TID = "q-0a1b2c3d-0-0"
TARGET = EndTxnTarget(TID, 7, 3)
OPEN = TxnDescription(TID, TxnState.ONGOING, 7, 3, 1, 60_000, 1_000, (("out", 0),))


class _Coordinator:
    """One id at one coordinator: a describe returns ``now``; InitProducerId runs
    ``on_init``, which may change ``now`` and answers with an error class."""

    def __init__(self, now: TxnDescription | None) -> None:
        self.now = now
        self.inits = 0
        self.answers: list[type[Exception]] = []

    def describe(self, ids: list[str], deadline: Deadline) -> Mapping[str, TxnDescription | None]:
        return {tid: self.now for tid in ids}

    def send_init(
        self, targets: Mapping[str, EndTxnTarget], timeouts: Mapping[str, int], deadline: Deadline
    ) -> dict[str, CoordinatorAnswer]:
        self.inits += 1
        error = self.answers.pop(0)
        return {tid: CoordinatorAnswer(error, coordinator_id=1, attempts=1) for tid in targets}

    def fence(self) -> dict[str, Any]:
        return fence_all(
            [TARGET], self.describe, self.send_init, Deadline(5), sleep=lambda seconds: None
        )


def test_a_fence_taken_whose_answer_was_lost_is_not_sent_again() -> None:
    """The InitProducerId bumped the epoch, and its answer was lost: the next describe shows
    the id past the target's epoch (here a new producer already writes on it), so it is
    fenced, and nothing is sent that would abort the new producer's transaction."""
    coordinator = _Coordinator(OPEN)
    coordinator.answers = [Errors.KafkaConnectionError]
    original = coordinator.send_init

    def taken_then_lost(*args: Any) -> dict[str, CoordinatorAnswer]:
        answers = original(*args)
        coordinator.now = replace(OPEN, epoch=5, start_time_ms=9_000)  # a newer producer's
        return answers

    coordinator.send_init = taken_then_lost  # type: ignore[method-assign]
    [outcome] = coordinator.fence().values()
    assert outcome.result is FenceResult.FENCED and coordinator.inits == 1


def test_a_fence_whose_request_was_not_taken_is_sent_again_after_a_describe() -> None:
    coordinator = _Coordinator(OPEN)
    coordinator.answers = [Errors.RequestTimedOutError, Errors.ConcurrentTransactionsError]
    original = coordinator.send_init

    def second_one_taken(*args: Any) -> dict[str, CoordinatorAnswer]:
        answers = original(*args)
        if coordinator.inits == 2:
            coordinator.now = replace(OPEN, state=TxnState.PREPARE_ABORT, epoch=4)
        return answers

    coordinator.send_init = second_one_taken  # type: ignore[method-assign]
    [outcome] = coordinator.fence().values()
    assert outcome.result is FenceResult.FENCED and coordinator.inits == 2


def test_nothing_is_sent_while_markers_are_written_or_after_the_epoch_moved() -> None:
    for now in (
        replace(OPEN, state=TxnState.COMPLETE_ABORT, epoch=4),  # a timeout fenced it
        replace(OPEN, producer_id=8, epoch=0),  # the epoch ran out: another producer id
        None,  # the coordinator forgot the id
    ):
        coordinator = _Coordinator(now)
        [outcome] = coordinator.fence().values()
        assert outcome.result is FenceResult.FENCED and coordinator.inits == 0, now


def test_an_authorization_error_is_a_refusal_with_the_error_named() -> None:
    coordinator = _Coordinator(OPEN)
    coordinator.answers = [Errors.TransactionalIdAuthorizationFailedError]
    [outcome] = coordinator.fence().values()
    assert outcome.result is FenceResult.REFUSED
    assert outcome.error is Errors.TransactionalIdAuthorizationFailedError


class _LosesTheAnswerNet:
    """kafka-python's client as the coordinators' batch drives it: the InitProducerId goes
    out and its connection drops before the answer."""

    def __init__(self) -> None:
        self.cluster = SimpleNamespace(add_coordinator=lambda entry, *a, **k: int(entry.node_id))
        self.inits = 0

    def least_loaded_node(self) -> int:
        return 1

    def in_flight_request_count(self, node_id: int | None = None) -> int:
        return 0

    def poll(self, timeout_ms: int | None = None, future: Future | None = None) -> list[Any]:
        return []

    def send(self, node_id: int | None, request: Any) -> Future:
        if isinstance(request, InitProducerIdRequest):
            self.inits += 1
            return Future().failure(Errors.KafkaConnectionError("socket disconnected"))
        entry = SimpleNamespace(
            key=TID, node_id=1, host="h", port=9092, error_code=0, error_message=None
        )
        return Future().success(SimpleNamespace(coordinators=[entry]))


def _init_producer_id(net: _LosesTheAnswerNet) -> dict[str, CoordinatorAnswer]:
    """The coordinators' batch of one InitProducerId, of ``TID``, over ``net``."""
    return call_coordinators(
        net,  # type: ignore[arg-type]
        [TID],
        InitProducerIdCall({TID: TARGET}, {TID: 60_000}),
        deadline=Deadline(3),
    )


def test_the_coordinators_batch_never_resends_an_init_producer_id_that_may_have_been_taken() -> (
    None
):
    """A connection lost after the request went out is the id's answer, not a reason to send
    it again (a describe-to-send window per retry, with nothing looking in between)."""
    net = _LosesTheAnswerNet()
    answers = _init_producer_id(net)
    assert net.inits == 1
    assert answers[TID].error is Errors.KafkaConnectionError and not answers[TID].timed_out


class _LookupBreaksOnceNet(_LosesTheAnswerNet):
    """The first FindCoordinator's connection breaks; every later request is answered."""

    def __init__(self) -> None:
        super().__init__()
        self.lookups = 0

    def send(self, node_id: int | None, request: Any) -> Future:
        if isinstance(request, InitProducerIdRequest):
            self.inits += 1
            return Future().success(SimpleNamespace(error_code=0))
        self.lookups += 1
        if self.lookups == 1:
            return Future().failure(Errors.KafkaConnectionError("socket disconnected"))
        return super().send(node_id, request)


def test_a_fence_whose_coordinator_lookup_broke_describes_again() -> None:
    """A lookup changes nothing, so a broken one never fails the fence (found by the
    shipped-sink property test on the model network); but time passed since the describe, and
    an InitProducerId aborts whatever transaction the id holds by then: the broken lookup is
    the id's answer, after which fence_all describes again (test_kafka_model.py has both)."""
    net = _LookupBreaksOnceNet()
    answers = _init_producer_id(net)
    assert net.lookups == 1 and net.inits == 0
    assert answers[TID].error is Errors.KafkaConnectionError and not answers[TID].timed_out
