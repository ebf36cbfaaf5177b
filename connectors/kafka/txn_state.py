"""What a transaction coordinator says of a transactional id: its state, producer, epoch,
start time and partitions (DescribeTransactions), and what that tells about one transaction.

Whether the id's open transaction is the one a producer holds is answered in one place,
:func:`standing_of`, for the writer's pre-commit, the driver's verify and commit, the sweep of
lingering transactions and the operator commands; each turns the answer into its own error.

>>> open_ = TxnDescription("q-0", TxnState.ONGOING, 7, 3, 1, 60_000, 1_000, (("out", 0),))
>>> standing_of(open_, 7, 3, start_time_ms=1_000, partitions=[("out", 0)])
<Standing.HELD: 'held'>
>>> standing_of(open_, 7, 3, partitions=[("out", 0), ("out", 1)])
<Standing.PARTITION_MISSING: 'partition-missing'>
>>> standing_of(open_, 7, 3, start_time_ms=900)
<Standing.BEGUN_AGAIN: 'begun-again'>
>>> standing_of(open_, 7, 3, begun_by_ms=999)
<Standing.BEGUN_AGAIN: 'begun-again'>
>>> standing_of(open_, 7, 2)
<Standing.FENCED: 'fenced'>
>>> from dataclasses import replace
>>> standing_of(replace(open_, state=TxnState.COMPLETE_ABORT, epoch=4), 7, 3)
<Standing.NOT_OPEN: 'not-open'>
>>> standing_of(None, 7, 3)
<Standing.UNKNOWN: 'unknown'>
"""

from __future__ import annotations

from collections.abc import Iterable
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

    def missing(self, partitions: Iterable[tuple[str, int]]) -> list[tuple[str, int]]:
        """Those of ``partitions`` that the transaction does not hold, sorted."""
        return sorted(set(partitions) - set(self.partitions))

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


class Standing(StrEnum):
    """How an id's transaction, as its coordinator describes it, stands to the one a producer
    (producer id and epoch) holds: :func:`standing_of`'s answer."""

    HELD = "held"  # Ongoing, that producer's at its epoch, begun as expected, every partition in
    # Ongoing at that producer's epoch, begun as expected, but without a partition written to:
    # ended and begun again at the same epoch (transactions V1), its records from before gone.
    PARTITION_MISSING = "partition-missing"
    # Ongoing at that producer's epoch, but begun at another time (or later than it can have):
    # ended and begun again at the same epoch.
    BEGUN_AGAIN = "begun-again"
    FENCED = "fenced"  # Ongoing at another producer id or epoch
    NOT_OPEN = "not-open"  # nothing Ongoing on the id: ended, fenced, or never begun
    UNKNOWN = "unknown"  # the id is unknown to its coordinator


def standing_of(
    now: TxnDescription | None,
    producer_id: int,
    epoch: int,
    *,
    start_time_ms: int = -1,
    begun_by_ms: int | None = None,
    partitions: Iterable[tuple[str, int]] = (),
) -> Standing:
    """Whether the id's open transaction, described as ``now``, is the one of (producer_id,
    epoch), never ended and begun again at that epoch (transactions V1 let a producer do that
    after an abort it did not see). Checked in this order, the first that fails answering:
    the id is known (else UNKNOWN); a transaction is Ongoing (NOT_OPEN); at producer_id and
    epoch (FENCED); begun at ``start_time_ms`` when both times are known
    (:meth:`TxnDescription.began_at`), and no later than ``begun_by_ms`` when given
    (BEGUN_AGAIN); holding every one of ``partitions`` (PARTITION_MISSING). HELD if all hold.
    A caller that knows no start time or partitions leaves them out."""
    if now is None:
        return Standing.UNKNOWN
    if now.state != TxnState.ONGOING:
        return Standing.NOT_OPEN
    if (now.producer_id, now.epoch) != (producer_id, epoch):
        return Standing.FENCED
    if not now.began_at(start_time_ms) or (
        begun_by_ms is not None and now.start_time_ms > begun_by_ms
    ):
        return Standing.BEGUN_AGAIN
    if now.missing(partitions):
        return Standing.PARTITION_MISSING
    return Standing.HELD
