r"""Fencing: end another process's transaction so that its producer can never write again.

An EndTxn(abort) ends a transaction at its producer's own epoch. Under transactions V1 (every
3.x broker, and 4.x below ``transaction.version`` 2) the producer keeps that epoch, so a
producer that is still alive goes on unaware (seen on Kafka 3.5.2 and 3.9.2):

- records it still had queued are appended after the abort marker: on a broker without
  KIP-890's partition verification (before 3.6, or ``transaction.partition.verification.enable
  =false``) they open a transaction that no coordinator knows, which pins the partition's last
  stable offset for good, and the next COMMIT marker of that producer id makes them visible;
- its next AddPartitionsToTxn, at the same epoch, begins a new transaction, which then
  commits without error while the aborted part is gone.

A fence ends the transaction as a new producer of the id would, the way Flink and Kafka
Streams end a lingering one: ``InitProducerId`` on the transactional id bumps its epoch, the
coordinator aborts the open transaction with abort markers at the new epoch, and every later
Produce or AddPartitionsToTxn of the old producer is refused as fenced, on every broker.

InitProducerId names the producer id and epoch the caller saw (KIP-360), but the coordinator
checks only the producer id when a transaction is Ongoing: it fences whatever transaction the
id holds, also one that a new producer began since. So a request is sent only right after a
describe that shows the target's epoch current, and never re-sent blindly: an answer that the
transaction is still ending (CONCURRENT_TRANSACTIONS) is followed by another describe. A
target is fenced once the id's epoch is past the target's, or the id names another producer id
(its epoch ran out), or the coordinator no longer knows the id.

>>> FenceOutcome(EndTxnTarget("t-0", 7, 3), FenceResult.FENCED).done
True
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import kafka.errors as Errors
from kafka.protocol.producer.transaction import InitProducerIdRequest

from checkpoint.deadline import Deadline, retry_pause
from connectors.kafka.end_txn import EndTxnTarget
from connectors.kafka.txn_coordinators import COORDINATOR_MOVED_ERRORS, CoordinatorAnswer
from connectors.kafka.txn_state import TxnDescription, TxnState

# InitProducerId v3 (Kafka 2.5+, KIP-360) is the first that names the producer id and epoch.
FENCE_INIT_PRODUCER_ID_VERSION = 3
# States in which the coordinator is writing markers; a fence sent now answers
# CONCURRENT_TRANSACTIONS, so the describe is repeated until they are done.
_ENDING = frozenset({TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE})


class FenceResult(StrEnum):
    FENCED = "fenced"  # no producer at the target's epoch can write or commit any more
    REFUSED = "refused"  # a non-retriable answer (an authorization error): it may still be open
    TIMED_OUT = "timed out"  # still at the target's epoch when the deadline came


@dataclass(frozen=True)
class FenceOutcome:
    """What one fence came to; ``now`` is the last description of the id (None: unknown)."""

    target: EndTxnTarget
    result: FenceResult
    now: TxnDescription | None = None
    error: type[Exception] | None = None
    detail: str = ""

    @property
    def done(self) -> bool:
        return self.result is FenceResult.FENCED

    def __str__(self) -> str:
        t = self.target
        name = f"fence of {t.transactional_id} (producer id {t.producer_id}, epoch {t.epoch})"
        if self.done:
            return f"{name}: fenced"
        error = f"{self.error.__name__}: " if self.error is not None else ""
        return f"{name} {self.result.value}: {error}{self.detail}"


def fenced(target: EndTxnTarget, now: TxnDescription | None) -> bool:
    """Whether the described id can no longer take a write at the target's epoch."""
    return (
        now is None
        or now.state == TxnState.DEAD
        or now.producer_id != target.producer_id
        or now.epoch > target.epoch
    )


# Answers and failures that prove an InitProducerId was not taken: it may be sent again, after
# a describe that shows the target's epoch still current (time passed: the coordinator moved,
# or is loading).
_NOT_TAKEN: tuple[type[Exception], ...] = (
    Errors.CoordinatorLoadInProgressError,
    Errors.NotCoordinatorError,
    Errors.CoordinatorNotAvailableError,
    Errors.NodeNotReadyError,  # refused before it was sent
    Errors.UnknownBrokerIdError,
)
# Failures after the request went out: it may have been taken. Sending it again without a
# describe could fence a transaction a new producer began meanwhile (the coordinator does not
# check the epoch of an Ongoing transaction), so these come back as answers.
_MAYBE_TAKEN: tuple[type[Exception], ...] = tuple(
    e for e in COORDINATOR_MOVED_ERRORS if e not in _NOT_TAKEN
)


class InitProducerIdCall:
    """InitProducerId at the target's producer id and epoch, one request per id. Sent once
    per describe: every answer and failure (one that proves it was not taken, a failed
    lookup, CONCURRENT_TRANSACTIONS, a lost answer, a timeout) comes back to
    :func:`fence_all`, which describes the id before it sends again: time passed, and a new
    producer may have begun a transaction that a late InitProducerId would abort."""

    retriable = _NOT_TAKEN
    unsure = _MAYBE_TAKEN
    versioned = False

    def __init__(self, targets: Mapping[str, EndTxnTarget], timeout_ms: Mapping[str, int]) -> None:
        self._targets, self._timeout_ms = targets, timeout_ms

    def requests(self, ids: list[str], versions: Mapping[int, int]) -> list[tuple[Any, list[str]]]:
        return [
            (
                InitProducerIdRequest(
                    transactional_id=tid,
                    transaction_timeout_ms=self._timeout_ms[tid],
                    producer_id=self._targets[tid].producer_id,
                    producer_epoch=self._targets[tid].epoch,
                    version=FENCE_INIT_PRODUCER_ID_VERSION,
                ),
                [tid],
            )
            for tid in ids
        ]

    def answers(self, response: Any, ids: list[str]) -> dict[str, tuple[type[Exception], Any]]:
        (tid,) = ids
        return {tid: (Errors.for_code(response.error_code), None)}


Describe = Callable[[list[str], Deadline], Mapping[str, TxnDescription | None]]
SendInit = Callable[
    [Mapping[str, EndTxnTarget], Mapping[str, int], Deadline], Mapping[str, CoordinatorAnswer]
]

# An answer after which the id is described again: the fence is under way, another producer
# moved the epoch on (the describe then shows it fenced), the answer was lost, or the request
# (or its coordinator lookup) was not taken.
_DESCRIBE_AGAIN = (
    *_NOT_TAKEN,
    Errors.ConcurrentTransactionsError,
    Errors.InvalidProducerEpochError,
    Errors.ProducerFencedError,
    Errors.InvalidProducerIdMappingError,
    *_MAYBE_TAKEN,
)


def fence_all(
    targets: Sequence[EndTxnTarget],
    describe: Describe,
    send_init: SendInit,
    deadline: Deadline,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, FenceOutcome]:
    """Fence every target, all ids at once, within ``deadline``.

    Each round describes the ids still pending and sends InitProducerId for those whose epoch
    is still the target's and whose coordinator is not writing markers; then it backs off and
    describes again. Raises only what the describe raises (a failed login, a deadline).
    """
    by_id = {t.transactional_id: t for t in targets}
    outcomes: dict[str, FenceOutcome] = {}
    last: dict[str, TxnDescription | None] = {}
    answers: dict[str, CoordinatorAnswer] = {}
    rounds = 0
    while len(outcomes) < len(by_id) and not deadline.expired():
        pending = [tid for tid in by_id if tid not in outcomes]
        described = describe(pending, deadline)
        send: dict[str, TxnDescription] = {}
        for tid in pending:
            now = last[tid] = described[tid]
            if fenced(by_id[tid], now):
                outcomes[tid] = FenceOutcome(by_id[tid], FenceResult.FENCED, now)
            elif now is not None and now.state not in _ENDING:
                send[tid] = now
        if send:
            timeouts = {tid: max(1, now.timeout_ms) for tid, now in send.items()}
            sent = send_init({tid: by_id[tid] for tid in send}, timeouts, deadline)
            answers.update(sent)
            for tid, answer in sent.items():
                refused = not answer.timed_out and not issubclass(
                    answer.error, (Errors.NoError, *_DESCRIBE_AGAIN)
                )
                if refused:
                    outcomes[tid] = FenceOutcome(
                        by_id[tid], FenceResult.REFUSED, last[tid], answer.error, answer.detail
                    )
        rounds += 1
        if len(outcomes) < len(by_id):
            sleep(deadline.bound(retry_pause(rounds)))
    for tid, target in by_id.items():
        if tid not in outcomes:
            now, answer = last.get(tid), answers.get(tid)
            seen = "unknown" if now is None else f"{now.state.value} at epoch {now.epoch}"
            outcomes[tid] = FenceOutcome(
                target,
                FenceResult.TIMED_OUT,
                now,
                None if answer is None else answer.error,
                f"still {seen} after {deadline.timeout} s"
                + ("" if answer is None or not answer.detail else f" ({answer.detail})"),
            )
    return outcomes
