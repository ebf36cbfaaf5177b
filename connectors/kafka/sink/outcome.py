"""Where a decided transaction stands, by the evidence its coordinator shows.

After the decision, the committer ends each transaction with EndTxn(commit). When that is
refused, a describe of the id must tell what became of the transaction. Only evidence about
that very transaction counts: the same producer id, and the start time the committable
recorded (the coordinator keeps it through the commit and the abort). A later transaction of
the id, a fence, another producer id or a forgotten id say nothing about it: the outcome is
then undetermined, never "lost", because re-processing a batch that did commit duplicates it.
A committable without a start time (decided by an earlier release) is never taken for lost.

>>> from connectors.kafka.txn_state import TxnDescription, TxnState
>>> decided = Committable("q-0", 7, 3, 10, (("out", 0),), start_time_ms=1_000)
>>> aborted = TxnDescription("q-0", TxnState.COMPLETE_ABORT, 7, 4, 1, 60_000, 1_000, ())
>>> outcome(decided, aborted, bump_possible=False)
<Outcome.LOST: 'lost'>
>>> later = TxnDescription("q-0", TxnState.COMPLETE_ABORT, 7, 5, 1, 60_000, 9_000, ())
>>> outcome(decided, later, bump_possible=False)
<Outcome.UNDETERMINED: 'undetermined'>
"""

from __future__ import annotations

from enum import StrEnum

from checkpoint.model import Committable
from connectors.kafka.txn_state import Standing, TxnDescription, standing_of


class Outcome(StrEnum):
    """Stable codes, shown by ``kafka-eos txn resolve``."""

    COMMITTED = "committed"  # committed or committing: nothing to do
    COMMITTABLE = "committable"  # still open as decided: a restart of the query commits it
    LOST = "lost"  # this very transaction was aborted: its records will never be visible
    UNDETERMINED = "undetermined"  # the coordinator no longer shows what became of it


# What no restart of the query can confirm as committed: the batch stays stuck on it.
UNCONFIRMABLE = (Outcome.LOST, Outcome.UNDETERMINED)


def outcome(decided: Committable, now: TxnDescription | None, *, bump_possible: bool) -> Outcome:
    """``now``: the id as described (None: its coordinator does not know it); ``bump_possible``:
    that coordinator may have moved the epoch on at EndTxn (transactions V2)."""
    if now is None:
        return Outcome.UNDETERMINED
    p, e, start = decided.producer_id, decided.epoch, decided.start_time_ms
    if now.is_commit_of(p, e, bump_possible=bump_possible, start_time_ms=start):
        return Outcome.COMMITTED
    if standing_of(now, p, e, start_time_ms=start) is Standing.HELD:
        return Outcome.COMMITTABLE
    if now.is_abort_of(p, e, start):
        return Outcome.LOST
    return Outcome.UNDETERMINED


def shown(decided: Committable, now: TxnDescription | None) -> str:
    """What the coordinator shows of a decided transaction's id, for an error that names it."""
    if now is None:
        return "unknown to its coordinator"
    return (
        f"now {now.state.value} with producer id {now.producer_id}, epoch {now.epoch}, "
        f"begun at {now.start_time_ms} (this one began at {decided.start_time_ms})"
    )
