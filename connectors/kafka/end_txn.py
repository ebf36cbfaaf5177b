r"""EndTxn of transactions that another process opened: what to end, and what came of it.

A batch names its transactions as :class:`EndTxnTarget`\ s; each comes back as an
:class:`EndTxnOutcome`: ended, refused (the coordinator's non-retriable answer), or timed out
(only retriable answers until the deadline).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import kafka.errors as Errors
from kafka.protocol.producer.transaction import EndTxnRequest

from connectors.kafka.txn_coordinators import COORDINATOR_MOVED_ERRORS, CoordinatorAnswer

# Worth another try before the deadline: the coordinator moved, is loading, or is still
# completing a previous EndTxn of the same transactional id.
RETRIABLE_END_TXN_ERRORS: tuple[type[Exception], ...] = (
    Errors.ConcurrentTransactionsError,
    Errors.CoordinatorLoadInProgressError,
    *COORDINATOR_MOVED_ERRORS,
)


def end_txn_version(versions: Mapping[int, int]) -> int:
    """The EndTxn version for a broker that speaks ``versions`` (API key -> highest usable,
    :func:`~connectors.kafka.txn_coordinators.usable_versions`: v5, which bumps the epoch, only
    where the broker finalized ``transaction.version`` 2)."""
    return min(EndTxnRequest.max_version, versions[EndTxnRequest.API_KEY])


@dataclass(frozen=True)
class EndTxnTarget:
    """One transaction to end, named as EndTxn names it."""

    transactional_id: str
    producer_id: int
    epoch: int


class EndTxnResult(StrEnum):
    ENDED = "ended"  # the coordinator took the EndTxn
    REFUSED = "refused"  # a non-retriable answer: ended before, fenced or lost; describe to tell
    TIMED_OUT = "timed out"  # retriable errors, or silence, until the deadline: it may have ended


@dataclass(frozen=True)
class EndTxnOutcome:
    """What one EndTxn of a batch came to. ``error``: the coordinator's answer (REFUSED) or
    the last retriable error (TIMED_OUT); ``coordinator_id``: the one that answered, or the
    last one tried."""

    target: EndTxnTarget
    commit: bool
    result: EndTxnResult
    error: type[Exception] | None = None
    detail: str = ""
    coordinator_id: int | None = None
    attempts: int = 0

    @classmethod
    def of(cls, target: EndTxnTarget, commit: bool, answer: CoordinatorAnswer) -> EndTxnOutcome:
        if answer.timed_out:
            result, error = EndTxnResult.TIMED_OUT, answer.error
        elif answer.error is Errors.NoError:
            result, error = EndTxnResult.ENDED, None
        else:
            result, error = EndTxnResult.REFUSED, answer.error
        return cls(
            target, commit, result, error, answer.detail, answer.coordinator_id, answer.attempts
        )

    def __str__(self) -> str:
        t = self.target
        name = (
            f"EndTxn({'commit' if self.commit else 'abort'}) of {t.transactional_id} "
            f"(producer id {t.producer_id}, epoch {t.epoch})"
        )
        if self.error is None:
            return f"{name} ended at coordinator {self.coordinator_id}"
        if self.result is EndTxnResult.REFUSED:
            return f"{name}: coordinator {self.coordinator_id} answered {self.error.__name__}"
        return (
            f"{name} did not finish before its deadline after {self.attempts} attempt(s); "
            f"last error: {self.error.__name__}: {self.detail}"
        )


class EndTxnCall:
    """EndTxn, one request per id, at the version its coordinator speaks."""

    retriable = RETRIABLE_END_TXN_ERRORS
    unsure = ()  # EndTxn names its transaction's epoch: a repeat is refused or idempotent
    versioned = True

    def __init__(self, targets: Mapping[str, EndTxnTarget], commit: bool) -> None:
        self._targets, self._commit = targets, commit

    def requests(self, ids: list[str], versions: Mapping[int, int]) -> list[tuple[Any, list[str]]]:
        # Pinned: the epoch moves on exactly when epoch_bumps_on_end_at() says so.
        version = end_txn_version(versions)
        return [
            (
                EndTxnRequest(
                    transactional_id=tid,
                    producer_id=self._targets[tid].producer_id,
                    producer_epoch=self._targets[tid].epoch,
                    committed=self._commit,
                    version=version,
                ),
                [tid],
            )
            for tid in ids
        ]

    def answers(self, response: Any, ids: list[str]) -> dict[str, tuple[type[Exception], Any]]:
        (tid,) = ids
        return {tid: (Errors.for_code(response.error_code), None)}
