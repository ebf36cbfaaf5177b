"""Stuck batches: decided batches of the sink with a transaction that cannot be confirmed.

The sink decided the batch, then one of its transactions could not be committed: the broker
aborted it (its ``transaction.timeout.ms`` expired before the commit:
:class:`~connectors.kafka.sink.errors.TransactionLostError`), or the coordinator no longer
shows what became of it (its id moved on: a late attempt of its task, a fence, a new producer
id: :class:`~connectors.kafka.sink.errors.CommitUndeterminedError`). Every restart re-drives
the decision's commits and stops on it. Resetting the query's checkpoint would replay the
whole batch and duplicate its transactions that did commit, so the way forward is narrower:
commit what still can be, then confirm the batch with an operator's acceptance of exactly the
transactions that cannot be confirmed (:class:`~checkpoint.model.AcceptedLoss`), lost and
undetermined apart: an undetermined one may well be visible, and is never to be re-processed
blindly. Recovery skips a confirmed batch, and the query goes on.

Used by ``kafka-eos txn resolve``. Reports are built as the JSON-ready dicts below first, and
printed as text or JSON second, as in :mod:`kafka_eos.operations.lingering`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

from checkpoint.deadline import Deadline
from checkpoint.errors import KafkaEosError
from checkpoint.model import AcceptedLoss, CheckpointId, Committable, Confirmation, Snapshot
from checkpoint.store import SnapshotStore
from connectors.kafka.end_txn import EndTxnResult, EndTxnTarget
from connectors.kafka.sink.committer import KafkaCommitter
from connectors.kafka.sink.errors import DecidedTransactionError
from connectors.kafka.sink.outcome import Outcome, outcome
from connectors.kafka.transactions import ENDED_OR_FENCED_ERRORS, TransactionAdmin
from connectors.kafka.txn_state import TxnDescription
from kafka_eos.operations.lingering import PartitionDict, TxnDict, decision_store, txn_dict

_log = logging.getLogger(__name__)


class ResolveRefused(KafkaEosError):
    """``--accept-loss`` wrote nothing; the message says why and what to do instead."""

    code = "KAFKA_EOS.OPERATIONS.RESOLVE_REFUSED"


@dataclass(frozen=True)
class DecidedTxn:
    """One transaction of a decided batch: as decided, and as its coordinator describes it."""

    decided: Committable
    now: TxnDescription | None  # None: the id is unknown to its coordinator
    standing: Outcome  # as the committer judges it (connectors.kafka.sink.outcome)


@dataclass(frozen=True)
class StuckBatch:
    """A decided, unconfirmed batch and where each of its transactions stands."""

    decision: Snapshot
    transactions: tuple[DecidedTxn, ...]

    @property
    def checkpoint_id(self) -> CheckpointId:
        return self.decision.checkpoint_id

    def having(self, standing: Outcome) -> tuple[Committable, ...]:
        return tuple(t.decided for t in self.transactions if t.standing == standing)

    def unconfirmable(self) -> tuple[Committable, ...]:
        """The transactions no restart can confirm: lost, or undetermined."""
        return self.having(Outcome.LOST) + self.having(Outcome.UNDETERMINED)


class DecidedTxnDict(TypedDict):
    transactional_id: str
    producer_id: int
    epoch: int
    record_count: int
    partitions: list[PartitionDict]


class ResolveTxnDict(TypedDict):
    decided: DecidedTxnDict  # as the decision names it
    now: TxnDict | None  # as described now; None: the id is unknown to its coordinator
    verdict: str  # an Outcome code


class StuckBatchDict(TypedDict):
    batch: int
    decided_at_ms: int | None
    transactions: list[ResolveTxnDict]
    summary: dict[str, int]  # count per Outcome code


class AcceptedLossDict(TypedDict):
    batch: int
    confirmed_at_ms: int | None
    accepted_by: str
    reason: str
    lost: list[DecidedTxnDict]
    undetermined: list[DecidedTxnDict]  # may have committed: never re-process them blindly


class ResolveReportDict(TypedDict):
    """JSON form of ``txn resolve --json``; version 2 (verdict "undetermined", and the
    accepted loss's "undetermined" list)."""

    version: int
    batches: list[StuckBatchDict]  # with --accept-loss: the resolved batch, after its commits
    accepted: AcceptedLossDict | None  # the confirmation --accept-loss wrote


def open_decisions(checkpoint_location: str) -> SnapshotStore:
    """The decisions of the query's sink; a location without any is refused (a typo)."""
    return decision_store(
        checkpoint_location, "if that query never completed a batch, no batch of it is stuck."
    )


def stuck_batches(store: SnapshotStore, admin: TransactionAdmin) -> list[StuckBatch]:
    """Every decided, unconfirmed batch in id order, each transaction described now."""
    decisions = (store.get(cid) for cid in store.unconfirmed_ids())
    return [inspect(admin, d) for d in decisions if d is not None]


def inspect(admin: TransactionAdmin, decision: Snapshot) -> StuckBatch:
    """Describe each transaction of ``decision``; a task that wrote nothing opened none."""
    opened = [c for c in decision.committables if not c.wrote_nothing]
    described = admin.describe(c.transactional_id for c in opened)
    # One ApiVersions per coordinator, not per transaction: a batch's ids share a few.
    coordinators = {d.coordinator_id for d in described.values() if d is not None}
    bumps = {node: admin.epoch_bumps_on_end_at(node) for node in coordinators}
    transactions = []
    for c in opened:
        now = described[c.transactional_id]
        bump_possible = now is not None and bumps[now.coordinator_id]
        transactions.append(DecidedTxn(c, now, outcome(c, now, bump_possible=bump_possible)))
    return StuckBatch(decision, tuple(transactions))


def named(batches: Sequence[StuckBatch], batch_id: int | None) -> list[StuckBatch]:
    """The batch ``--batch`` names, or every one without it; a batch that is not decided and
    unconfirmed is refused, since there is nothing to resolve in it."""
    if batch_id is None:
        return list(batches)
    found = [b for b in batches if b.checkpoint_id == batch_id]
    if not found:
        raise ResolveRefused(
            f"--batch {batch_id} is not a decided, unconfirmed batch (those are "
            f"{[b.checkpoint_id for b in batches]}): a batch never decided has nothing to "
            "commit, and a confirmed one is no longer retried by the query"
        )
    return found


def select(batches: Sequence[StuckBatch]) -> StuckBatch:
    """The one batch whose loss ``--accept-loss`` accepts; refused unless it has a lost or an
    undetermined transaction (otherwise a restart of the query resolves it with nothing
    lost)."""
    if not batches:
        raise ResolveRefused(
            "no decided batch is unconfirmed: nothing is stuck, so there is no loss to accept"
        )
    if len(batches) > 1:
        raise ResolveRefused(
            f"decided batches {[b.checkpoint_id for b in batches]} are unconfirmed: pass "
            "--batch N to name the one whose loss you accept"
        )
    (batch,) = batches
    if not batch.unconfirmable():
        raise ResolveRefused(
            f"batch {batch.checkpoint_id} has no lost or undetermined transaction, so there is "
            "no loss to accept: restart the query instead; its recovery commits the "
            "committable ones"
        )
    return batch


def accept_loss(
    committer: KafkaCommitter,
    store: SnapshotStore,
    batch: StuckBatch,
    *,
    reason: str,
    accepted_by: str,
    now_ms: int,
) -> tuple[StuckBatch, Confirmation]:
    """Commit the batch's committable transactions, then confirm it naming the lost and the
    undetermined ones, apart.

    Writes nothing if the transactions moved meanwhile (one that was committable timed out
    before its commit, say): the operator accepted the loss shown, not another one.
    Returns the batch as described after the commits, and the confirmation written.
    """
    for committable in batch.having(Outcome.COMMITTABLE):
        # Lost or undetermined meanwhile: the describe below tells.
        with contextlib.suppress(DecidedTransactionError):
            committer.commit(committable)
    _refuse_if_the_broker_commits(committer, batch)
    after = inspect(committer.admin, batch.decision)
    lost, undetermined = after.having(Outcome.LOST), after.having(Outcome.UNDETERMINED)
    changed = (set(lost), set(undetermined)) != (
        set(batch.having(Outcome.LOST)),
        set(batch.having(Outcome.UNDETERMINED)),
    )
    if after.having(Outcome.COMMITTABLE) or changed:
        raise ResolveRefused(
            f"batch {batch.checkpoint_id} changed while it was resolved (lost before: "
            f"{_ids(batch.having(Outcome.LOST))}, undetermined before: "
            f"{_ids(batch.having(Outcome.UNDETERMINED))}; now lost: {_ids(lost)}, undetermined: "
            f"{_ids(undetermined)}, still open: {_ids(after.having(Outcome.COMMITTABLE))}); "
            "nothing was confirmed. Run `kafka-eos txn resolve` again to review the batch"
        )
    loss = AcceptedLoss(lost, reason, accepted_by, undetermined)
    store.confirm(batch.checkpoint_id, confirmed_at_ms=now_ms, accepted_loss=loss)
    _log.warning(
        "batch %s confirmed with an accepted loss, by %s, because %r: its transactions %s "
        "will never commit (%s records lost to read_committed readers), and %s may or may not "
        "have committed (%s records); confirmation in %s",
        batch.checkpoint_id, accepted_by, reason, _ids(lost),
        sum(c.record_count for c in lost), _ids(undetermined),
        sum(c.record_count for c in undetermined), store.location,
    )  # fmt: skip
    return after, Confirmation(batch.checkpoint_id, now_ms, loss)


def _refuse_if_the_broker_commits(committer: KafkaCommitter, batch: StuckBatch) -> None:
    """Ask the coordinators themselves before a loss is accepted: an EndTxn(commit) that
    repeats the decision is always safe, and a coordinator answers success for a commit it
    already made even when the describe cannot show it (transactions V2 moved the id to a new
    producer id when its epoch overflowed). Only a refusal that says the transaction is not
    this one any more (fenced, another producer id, a wrong state) lets the loss be accepted;
    a timeout or any other answer proves nothing."""
    targets = [
        EndTxnTarget(c.transactional_id, c.producer_id, c.epoch) for c in batch.unconfirmable()
    ]
    outcomes = committer.admin.end_transactions(
        targets, commit=True, deadline=Deadline(committer.timeout_s)
    )
    committed = sorted(t for t, o in outcomes.items() if o.result is EndTxnResult.ENDED)
    if committed:
        raise ResolveRefused(
            f"batch {batch.checkpoint_id}: the coordinators accepted EndTxn(commit) of "
            f"{committed}, which the describe showed as lost or undetermined: they are committed, "
            "and nothing "
            "was confirmed. Restart the query: its recovery confirms the batch"
        )
    unproven = sorted(
        f"{t} ({o})"
        for t, o in outcomes.items()
        if o.result is EndTxnResult.TIMED_OUT
        or (o.error is not None and not issubclass(o.error, ENDED_OR_FENCED_ERRORS))
    )
    if unproven:
        raise ResolveRefused(
            f"batch {batch.checkpoint_id}: no definite answer from the coordinators for "
            f"{unproven}, so the loss is not proven and nothing was confirmed. Check the "
            "brokers and run it again (raise --timeout for a slow cluster)"
        )


def resolve_report(
    batches: Sequence[StuckBatch], accepted: Confirmation | None = None
) -> ResolveReportDict:
    """The batches and their transactions, and the confirmation ``--accept-loss`` wrote."""
    return {
        "version": 2,
        "batches": [_batch_dict(b) for b in batches],
        "accepted": None if accepted is None else _accepted_dict(accepted),
    }


def _accepted_dict(confirmation: Confirmation) -> AcceptedLossDict:
    loss = confirmation.accepted_loss
    assert loss is not None, "only a confirmation with an accepted loss is reported"
    return {
        "batch": confirmation.checkpoint_id,
        "confirmed_at_ms": confirmation.confirmed_at_ms,
        "accepted_by": loss.accepted_by,
        "reason": loss.reason,
        "lost": [_decided_dict(c) for c in loss.lost],
        "undetermined": [_decided_dict(c) for c in loss.undetermined],
    }


def _batch_dict(batch: StuckBatch) -> StuckBatchDict:
    transactions: list[ResolveTxnDict] = [
        {
            "decided": _decided_dict(t.decided),
            "now": None if t.now is None else txn_dict(t.now),
            "verdict": t.standing.value,
        }
        for t in batch.transactions
    ]
    return {
        "batch": batch.checkpoint_id,
        "decided_at_ms": batch.decision.decided_at_ms,
        "transactions": transactions,
        "summary": {s.value: len(batch.having(s)) for s in Outcome},
    }


def _decided_dict(committable: Committable) -> DecidedTxnDict:
    return {
        "transactional_id": committable.transactional_id,
        "producer_id": committable.producer_id,
        "epoch": committable.epoch,
        "record_count": committable.record_count,
        "partitions": [{"topic": t, "partition": p} for t, p in committable.partitions],
    }


def _ids(committables: Sequence[Committable]) -> str:
    return ", ".join(c.transactional_id for c in committables) or "none"
