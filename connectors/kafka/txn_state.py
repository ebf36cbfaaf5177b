"""What a transaction coordinator says of a transactional id: its state, producer, epoch,
start time and partitions (DescribeTransactions), and what that tells about one transaction."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class TxnState(StrEnum):
    """The coordinator's state of a transactional id (DescribeTransactions wire values)."""

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    DEAD = "Dead"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"
    UNKNOWN = "Unknown"


_COMMITTED = (TxnState.COMPLETE_COMMIT, TxnState.PREPARE_COMMIT)
_ABORTED = (TxnState.COMPLETE_ABORT, TxnState.PREPARE_ABORT)


@dataclass(frozen=True)
class TxnDescription:
    """One id as its coordinator describes it. ``start_time_ms`` (the coordinator's clock) is
    when its current or last transaction began, -1 if none: it survives that transaction's
    commit and abort, so it tells one transaction of a producer epoch from a later one."""

    transactional_id: str
    state: TxnState
    producer_id: int
    epoch: int
    coordinator_id: int
    timeout_ms: int
    start_time_ms: int
    partitions: tuple[tuple[str, int], ...]

    def began_at(self, start_time_ms: int) -> bool:
        """Whether this is the transaction that began at ``start_time_ms``; true when either
        time is unknown (-1: a committable of an earlier release, or no transaction)."""
        return start_time_ms < 0 or self.start_time_ms < 0 or self.start_time_ms == start_time_ms

    def holds(self, producer_id: int, epoch: int, start_time_ms: int = -1) -> bool:
        """Whether the id's open transaction is the one of (producer_id, epoch) that began at
        ``start_time_ms``: still Ongoing, and never ended and begun again at the same epoch
        (transactions V1 let a producer do that after an abort it did not see)."""
        return (
            self.state == TxnState.ONGOING
            and (self.producer_id, self.epoch) == (producer_id, epoch)
            and self.began_at(start_time_ms)
        )

    def is_abort_of(self, producer_id: int, epoch: int, start_time_ms: int) -> bool:
        """Whether the transaction of (producer_id, epoch) that began at ``start_time_ms`` is
        aborted or aborting: the id shows an abort with that very start time, at the epoch of
        the transaction or a later one (a timeout or a fence bumps it). Never without a start
        time: an abort at E + 1 may be a later transaction of the id, begun after this one
        committed (a late attempt that took the id and aborted its own)."""
        return (
            start_time_ms >= 0
            and self.state in _ABORTED
            and self.producer_id == producer_id
            and self.start_time_ms == start_time_ms
        )

    def is_commit_of(
        self, producer_id: int, epoch: int, *, bump_possible: bool, start_time_ms: int = -1
    ) -> bool:
        """Whether the transaction (producer_id, epoch), which was seen Ongoing at ``epoch``
        (and began at ``start_time_ms``, when known), is committed or committing.

        Its commit shows as epoch E under transactions V1 and as E + 1 under V2 (EndTxn bumps
        the epoch). E is always accepted: a V2 commit never shows E, so E means V1 ended it,
        even at a coordinator that speaks V2 now (a rolling upgrade between the pre-commit
        and the commit). E + 1 is accepted only where the coordinator could have bumped
        (``bump_possible``: it takes EndTxn v5, :meth:`TransactionAdmin.epoch_bumps_on_end_at`).
        On a V1 cluster (3.x, or 4.x at ``transaction.version`` 0 or 1) E + 1 committed is a later
        transaction of the id, after an InitProducerId bump of an abort that kept the epoch:
        possible only for a second lineage of the query (a copied checkpoint), and taking it
        for this one's would hide a loss.
        """
        accepted = (epoch, epoch + 1) if bump_possible else (epoch,)
        return (
            self.state in _COMMITTED
            and self.producer_id == producer_id
            and self.epoch in accepted
            and self.began_at(start_time_ms)
        )
