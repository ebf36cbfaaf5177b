"""The committer: ends the transactions that tasks pre-committed, from the driver.

It implements :class:`checkpoint.participant.Committer`, so the checkpoint coordinator drives
it: commit on notify-complete (after the decision is durable), abort on the abort
notification, and abort of lingering transactions on recovery. Every abort is a fence
(:mod:`connectors.kafka.fence`): the producer of an aborted transaction, if it still lives,
can neither write on nor begin another transaction at its epoch. Commit failures are sorted
as Flink's ``KafkaCommitter`` sorts them: retriable (retried until the deadline),
ended-or-fenced (resolved by describing the transaction, :mod:`connectors.kafka.sink.outcome`:
committed is success, aborted is a loss, anything the coordinator no longer shows is
undetermined; both fail loudly), unknown (raised).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kafka.structs import TopicPartition

from checkpoint.crashpoints import CrashPoint, crash_point
from checkpoint.deadline import Deadline
from checkpoint.errors import DeadlineExceeded
from checkpoint.model import CheckpointId, Committable
from connectors.kafka.end_txn import EndTxnResult, EndTxnTarget
from connectors.kafka.fence import FenceResult
from connectors.kafka.sink.errors import (
    CommitUndeterminedError,
    PreCommitLostError,
    PrefixConflictError,
    TransactionLostError,
)
from connectors.kafka.sink.lifetime import commit_margin_ms, remaining_ms
from connectors.kafka.sink.listing import open_transactions
from connectors.kafka.sink.marker_repair import Fenced, settle, settle_fenced
from connectors.kafka.sink.naming import NO_OWNER, TransactionalIdNaming
from connectors.kafka.sink.outcome import Outcome, outcome, shown
from connectors.kafka.sink.owners import Entry, OwnerRegistry, Unknown
from connectors.kafka.transactions import TransactionAdmin
from connectors.kafka.txn_state import Standing, standing_of

_log = logging.getLogger(__name__)


class KafkaCommitter:
    """Commits and aborts the transactions of one query (one :class:`TransactionalIdNaming`).

    Without ``naming`` it can commit and abort given transactions, but not find lingering
    ones (the operator commands use it so).
    """

    def __init__(
        self,
        client_config: Mapping[str, Any],
        naming: TransactionalIdNaming | None = None,
        timeout_s: float = 60.0,
        *,
        location: str = "",
        prefix_derived: bool = False,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._client_config = dict(client_config)
        self._naming = naming
        self._prefix_derived = prefix_derived
        self._timeout_s = timeout_s
        self._location = location
        self._wall_clock = wall_clock
        self._admin: TransactionAdmin | None = None
        # Once the cluster stayed out of reach for timeout_s, later aborts and sweeps of this
        # committer (Spark's abort() runs one per committable, then the sweep) fail at once
        # instead of each waiting as long again. Commits always make their own attempt.
        self._unreachable: DeadlineExceeded | None = None

    @property
    def timeout_s(self) -> float:
        """The deadline of one batch's EndTxns (``commitTimeoutMs``, or ``--timeout``)."""
        return self._timeout_s

    @property
    def admin(self) -> TransactionAdmin:
        if self._unreachable is not None:
            raise self._unreachable
        if self._admin is None:
            # It reaches for the cluster as long as it retries its EndTxns.
            try:
                self._admin = TransactionAdmin(
                    self._client_config, reach_timeout_ms=int(self._timeout_s * 1000)
                )
            except DeadlineExceeded as exc:
                self._unreachable = exc
                raise
        return self._admin

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None

    def verify(self, checkpoint_id: CheckpointId, committables: Sequence[Committable]) -> None:
        """Just before the decision: every transaction must still be the open one its task
        left, with every partition the task wrote to, and at least the commit margin of its
        timeout left.

        A transaction the broker already aborted (timeout), or will abort before the driver
        can commit it, must stop the batch *before* it is decided: deciding it would turn a
        harmless replay into data loss. So must one that was ended and begun again at the
        same epoch (transactions V1), whose records from before are gone.
        """
        described = self.admin.describe(c.transactional_id for c in committables)
        now_ms = int(self._wall_clock() * 1000)
        for c in committables:
            now = described[c.transactional_id]
            standing = standing_of(
                now, c.producer_id, c.epoch, start_time_ms=c.start_time_ms, partitions=c.partitions
            )
            if standing is Standing.UNKNOWN:
                raise PreCommitLostError(checkpoint_id, c.transactional_id, "the id is unknown")
            assert now is not None
            if standing not in (Standing.HELD, Standing.PARTITION_MISSING):
                # Not open, fenced, or begun again at its epoch (another start time).
                raise PreCommitLostError(
                    checkpoint_id,
                    c.transactional_id,
                    f"expected Ongoing with producer id {c.producer_id} and epoch {c.epoch}, "
                    f"begun at {c.start_time_ms}, found {now.state.value} with producer id "
                    f"{now.producer_id} and epoch {now.epoch}, begun at {now.start_time_ms}",
                )
            if standing is Standing.PARTITION_MISSING:
                raise PreCommitLostError(
                    checkpoint_id,
                    c.transactional_id,
                    f"its coordinator no longer lists partitions {now.missing(c.partitions)} in "
                    "it: it was ended and begun again at the same epoch, and their records are "
                    "gone",
                )
            left_ms = remaining_ms(now.start_time_ms, now.timeout_ms, now_ms)
            margin_ms = commit_margin_ms(now.timeout_ms, int(self._timeout_s * 1000))
            if left_ms < margin_ms:
                raise PreCommitLostError(
                    checkpoint_id,
                    c.transactional_id,
                    f"it began {(now_ms - now.start_time_ms) / 1000:.1f} s ago and the broker "
                    f"aborts it after transaction.timeout.ms = {now.timeout_ms}: "
                    f"{max(left_ms, 0) / 1000:.1f} s left, below the commit margin of "
                    f"{margin_ms / 1000:.1f} s that deciding and committing it needs",
                )

    def commit(self, committable: Committable) -> None:
        """Commit one transaction; see :meth:`commit_all`."""
        failures = self.commit_all([committable])
        if failures:
            raise failures[0][1]

    def commit_all(self, committables: Sequence[Committable]) -> list[tuple[str, Exception]]:
        """EndTxn(commit) of every transaction at once, under one ``timeout_s`` deadline
        (:meth:`TransactionAdmin.end_transactions`: grouped by coordinator, an unreachable one
        retried last, never holding back the others).

        A refused EndTxn is described before anything is concluded
        (:func:`~connectors.kafka.sink.outcome.outcome`): already committed is success (a
        re-driven commit after a crash), still open is an error that the next restart
        retries, aborted is :class:`TransactionLostError`, anything else
        :class:`CommitUndeterminedError`.
        """
        written = [c for c in committables if not c.wrote_nothing]
        if not written:
            return []
        crash_point(CrashPoint.DRIVER_BEFORE_END_TXN)
        # A decided batch's commit tries to reach the cluster even if an abort or sweep of this
        # committer gave up on it: a batch write's abort() sweeps, then retries its decided
        # commit, which has no restart to finish it.
        self._unreachable = None
        try:
            admin = self.admin
        except DeadlineExceeded as exc:
            # Nothing was sent: each commit failed as a timed-out EndTxn would, and the caller
            # (notify-complete) reports the decided batch as not yet committed.
            return [(c.transactional_id, exc) for c in written]
        outcomes = admin.end_transactions(
            [EndTxnTarget(c.transactional_id, c.producer_id, c.epoch) for c in written],
            commit=True,
            deadline=Deadline(self._timeout_s),
        )
        failures: list[tuple[str, Exception]] = []
        for c in written:
            ended = outcomes[c.transactional_id]
            try:
                if ended.result is EndTxnResult.TIMED_OUT:
                    raise DeadlineExceeded(
                        f"{ended}. commitTimeoutMs = {int(self._timeout_s * 1000)}: raise it, or "
                        "check the brokers; the decision stands and the next restart commits it"
                    )
                if ended.result is EndTxnResult.REFUSED:
                    assert ended.error is not None
                    self._check_committed(c, ended.error)
            except Exception as exc:
                failures.append((c.transactional_id, exc))
        return failures

    def settle_markers(
        self, checkpoint_id: CheckpointId, committables: Sequence[Committable]
    ) -> list[TopicPartition]:
        """The confirmed decision's COMMIT markers, on every partition, within ``timeout_s``
        (:func:`connectors.kafka.sink.marker_repair.settle`); the partitions repaired."""
        written = [c for c in committables if not c.wrote_nothing]
        if not written:
            return []
        return settle(
            self.admin,
            checkpoint_id,
            written,
            deadline=Deadline(self._timeout_s),
            reconnect=self._reconnect,
        )

    def _reconnect(self) -> TransactionAdmin:
        self.close()
        self._unreachable = None
        return self.admin

    def _check_committed(self, committable: Committable, error: type[Exception]) -> None:
        """EndTxn answered ``error``: success only if the transaction is committed already."""
        tid, c = committable.transactional_id, committable
        now = self.admin.describe([tid])[tid]
        bump_possible = now is not None and self.admin.epoch_bumps_on_end_at(now.coordinator_id)
        standing = outcome(c, now, bump_possible=bump_possible)
        if standing is Outcome.COMMITTED:
            return  # committed before (a re-driven commit after a crash): idempotent
        if standing is Outcome.COMMITTABLE:
            # Still open and ours (an authorization error, an unsupported version, a broker
            # bug): not lost yet, and recovery can commit it once the cause is fixed.
            raise error(
                f"EndTxn(commit) of {tid} answered {error.__name__}; the transaction is still "
                "open and is committed again at the next restart"
            )
        lost = TransactionLostError if standing is Outcome.LOST else CommitUndeterminedError
        detail = f"EndTxn(commit) answered {error.__name__}; the id is {shown(c, now)}"
        raise lost(tid, c.producer_id, c.epoch, detail)

    def abort(self, committable: Committable) -> None:
        """Fence a pre-committed transaction's producer, which aborts the transaction; one
        that already ended is fenced all the same, so that its producer cannot go on."""
        if committable.wrote_nothing:
            return
        c = committable
        self._fence_all([Fenced(c.transactional_id, c.producer_id, c.epoch, c.partitions)])

    def abort_lingering(self, keep: Sequence[Committable]) -> None:
        """Fence every open transaction of this query that ``keep`` does not name; then
        refuse to go on if another query writes with the same prefix.

        Lingering transactions were left by attempts that died or lost (zombies), or by a
        batch that was never decided. Ids beyond today's task count (after a change of
        parallelism) are found too, because the listing goes by prefix. Another query's
        transactions are never aborted: they may be decided.
        """
        if self._naming is None:
            raise ValueError("a committer without naming cannot tell which transactions it owns")
        naming = self._naming
        kept: dict[str, list[Committable]] = {}
        for c in keep:
            kept.setdefault(c.transactional_id, []).append(c)
        foreign: dict[str, list[str]] = {}
        lingering: list[Fenced] = []
        for now in open_transactions(self.admin, naming.prefix):
            owner = naming.foreign_owner(now.transactional_id)
            if owner is not None:
                foreign.setdefault(owner, []).append(now.transactional_id)
            elif not any(
                standing_of(now, c.producer_id, c.epoch) is Standing.HELD
                for c in kept.get(now.transactional_id, ())
            ):
                _log.warning(
                    "aborting lingering transaction %s (producer id %s, epoch %s): an attempt "
                    "that died or lost to another attempt of its task left it",
                    now.transactional_id, now.producer_id, now.epoch,
                )  # fmt: skip
                lingering.append(
                    Fenced(now.transactional_id, now.producer_id, now.epoch, now.partitions)
                )
        self._fence_all(lingering)
        if foreign:
            now_ms = int(self._wall_clock() * 1000)
            owners = [o for o in foreign if o != NO_OWNER]
            where: dict[str, Entry] = dict(self._registry().lookup(owners))
            where.setdefault(NO_OWNER, Unknown("a release before owners"))
            raise PrefixConflictError(
                naming.prefix,
                self._location,
                naming.owner,
                {o: (where[o], ids) for o, ids in foreign.items()},
                now_ms,
                prefix_derived=self._prefix_derived,
            )

    def register_location(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Record where this query checkpoints, so that another query of the prefix can name
        it in its :class:`PrefixConflictError`: best effort, at most hourly, and never while
        a batch's transactions are open and ageing (before the tasks run, or after the
        commit)."""
        if self._naming is not None and self._location:
            self._registry().register(self._naming.owner, self._location, partitions)

    def _registry(self) -> OwnerRegistry:
        assert self._naming is not None
        cluster = str(self._client_config.get("bootstrap.servers"))
        return OwnerRegistry(
            lambda: self.admin.kafka_admin,
            cluster,
            self._naming.prefix,
            wall_clock=self._wall_clock,
        )

    def _fence_all(self, fenced: Sequence[Fenced]) -> None:
        """Fence every transaction at once (:meth:`TransactionAdmin.fence_transactions`): each
        one is aborted, and its producer can write no more. Then its ABORT markers, before the
        id can be taken again (:func:`connectors.kafka.sink.marker_repair.settle_fenced`): a
        Kafka 4.x coordinator skips those of a partition whose leader is offline."""
        if not fenced:
            return
        targets = [EndTxnTarget(f.transactional_id, f.producer_id, f.epoch) for f in fenced]
        outcomes = self.admin.fence_transactions(targets, deadline=Deadline(self._timeout_s))
        done = [f for f in fenced if outcomes[f.transactional_id].done]
        # The markers of those fenced first, also when another fence failed.
        settle_fenced(
            self.admin, done, deadline=Deadline(self._timeout_s), reconnect=self._reconnect
        )
        for fence in outcomes.values():
            if fence.result is FenceResult.TIMED_OUT:
                raise DeadlineExceeded(str(fence))
            if fence.result is FenceResult.REFUSED:
                assert fence.error is not None
                raise fence.error(str(fence))
