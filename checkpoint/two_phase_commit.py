"""The commit path, top-down: verify, recover, decide, commit, confirm; and abort.

:meth:`TwoPhaseCommit.complete` runs, for checkpoint N once every participant acknowledged
(in Spark: ``DataSourceStreamWriter.commit(messages, N)``), the numbered steps below. Steps 1-2
(trigger, acknowledge) are the engine's (:mod:`checkpoint.reference_coordinator` in-process;
in Spark, planning ``offsets/N`` and the tasks' pre-commits).

0. Replay: N is already decided (a crash came after step 5, before the engine recorded N as
   done). The recorded decision wins, if it was taken for the same plan of N; its commits are
   re-driven, and whatever the replay pre-committed is aborted.
R1. Recover decided: every older decided, unconfirmed checkpoint goes through steps 4-5.
    Never aborts anything, so it is also safe at start-up before any task runs
    (:meth:`TwoPhaseCommit.recover_decided`).
R2. Abort lingering transactions in the committer's scope that N does not name: dead or
    zombie attempts, a crashed run's undecided checkpoint (presumed abort). Only with
    ``sweeps_lingering``: one checkpoint in flight at a time, as in Spark.
V. Verify: every committable is still open and will live long enough to be committed. The
   last step before the decision, so that nothing between them uses up a transaction's life.
3. Decide: the snapshot (committables, plan, offsets) is written to the store. The commit
   point: once durable the checkpoint is complete, whatever crashes next.
4. Notify complete: every committable is committed, concurrently where the committer can,
   under one deadline; commit is idempotent.
5. Confirm: a confirmation is written so recovery leaves these transactions alone; old
   decisions are pruned.

:class:`TwoPhaseCommit` keeps no state between calls; every call reads and writes the store.
That is what the Spark sink needs: ``commit(messages, N)`` and ``abort(messages, N)`` may each
run in a fresh driver-side Python process.

>>> from checkpoint.testing import InMemoryBroker, InMemoryParticipant
>>> import tempfile
>>> broker = InMemoryBroker()
>>> task = InMemoryParticipant(broker, "sink-0")
>>> task.begin_transaction(0); task.write(0, "row")
>>> message = task.pre_commit(0)                       # in the task, at its end (barrier)
>>> store = SnapshotStore(tempfile.mkdtemp())
>>> driver = TwoPhaseCommit(store, InMemoryParticipant(broker, "sink"))
>>> driver.complete(0, [message]).checkpoint_id        # in commit(messages, batchId=0)
0
>>> broker.visible, store.is_confirmed(0)
(['row'], True)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from checkpoint.crashpoints import CrashPoint, crash_point
from checkpoint.errors import (
    AbortReason,
    CheckpointAborted,
    CheckpointCommitFailed,
    ProtocolError,
    ReusedCheckpointId,
)
from checkpoint.model import (
    CheckpointId,
    Committable,
    Snapshot,
    SourceOffset,
    TopicPartition,
    as_checkpoint_id,
)
from checkpoint.participant import Committer
from checkpoint.store import SnapshotStore

_log = logging.getLogger(__name__)

SourceOffsets = Mapping[TopicPartition, int] | Iterable[SourceOffset]


@dataclass(frozen=True)
class Recovery:
    """What recovery did, and where the source resumes (``snapshot.source_offsets``)."""

    snapshot: Snapshot | None
    recommitted: tuple[CheckpointId, ...] = ()
    aborted: tuple[CheckpointId, ...] = ()


class TwoPhaseCommit:
    """Decide, notify, confirm and recover, against a store and a committer.

    ``sweeps_lingering``: the engine runs one checkpoint at a time (Spark), so every open
    transaction of the committer's scope that the checkpoint being decided does not name is
    left by a dead or zombie attempt, and is aborted before the decision (R2) and on abort.
    An engine with several checkpoints in flight must leave it off: younger checkpoints' open
    transactions are not lingering.
    """

    def __init__(
        self,
        store: SnapshotStore,
        committer: Committer,
        *,
        pipeline_id: str = "kafka-eos",
        sweeps_lingering: bool = False,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.committer = committer
        self.pipeline_id = pipeline_id
        self.sweeps_lingering = sweeps_lingering
        self._wall_clock = wall_clock

    def complete(
        self,
        checkpoint_id: int,
        committables: Iterable[Committable],
        *,
        plan: str | None = None,
        source_offsets: SourceOffsets = (),
        triggered_at_ms: int | None = None,
    ) -> Snapshot:
        """Every step from R1 to 5, once every participant acknowledged ``checkpoint_id``.

        ``plan`` fingerprints what the engine planned for the checkpoint (Spark: its
        ``offsets/N``). Raises :class:`CheckpointCommitFailed` if step 4 failed (the decision
        stands), :class:`ReusedCheckpointId` for a decided id planned anew, and whatever the
        committer's verification raises (nothing was decided then).
        """
        cid = as_checkpoint_id(checkpoint_id)
        batch = tuple(c for c in committables if not c.wrote_nothing)
        if len({c.transactional_id for c in batch}) != len(batch):
            raise ProtocolError(f"checkpoint {cid} names a transactional id twice: {batch!r}")
        recorded = self.store.get(cid)
        if recorded is not None:
            return self._replay(recorded, batch, plan)
        newest = max(self.store.checkpoint_ids(), default=-1)
        if cid < newest:
            # Deciding an older checkpoint after a newer one would reorder output. Spark never
            # does this, so it is a caller bug or a second writer on the same location.
            self.abort(cid, batch, reason=AbortReason.STALE)
            raise CheckpointAborted(cid, AbortReason.STALE, f"checkpoint {newest} is decided")
        # R1: older decisions first, so output stays in checkpoint order.
        self.recover_decided()
        if self.sweeps_lingering:
            # R2: only this checkpoint's transactions may stay open past its decision.
            self.committer.abort_lingering(batch)
        crash_point(CrashPoint.DRIVER_BEFORE_VERIFY, checkpoint_id=cid)
        # V: the last step before the decision; a transaction that fails it was never decided,
        # so failing here is a harmless replay, while failing after step 3 would be a loss.
        self.committer.verify(cid, batch)
        offsets = Snapshot.offsets_from(source_offsets)
        snapshot = Snapshot(
            cid, self.pipeline_id, batch, offsets, triggered_at_ms, self._now_ms(), plan
        )
        # Step 3: the commit point. Until this write returns a crash means abort; after it,
        # aborting any of these committables would drop a pre-committed, decided batch.
        self.store.write(snapshot)
        self.notify_complete(snapshot)
        return snapshot

    def _replay(
        self, recorded: Snapshot, batch: tuple[Committable, ...], plan: str | None
    ) -> Snapshot:
        """Step 0: the engine runs a decided checkpoint again (a crash came after step 3,
        before the engine recorded it as done)."""
        cid = recorded.checkpoint_id
        if plan is not None and recorded.plan is not None and plan != recorded.plan:
            # The id was planned anew (an operator deleted Spark's offsets/N): this run's
            # tasks wrote nothing, trusting the decision, so passing would lose its input.
            self.abort(cid, batch, reason="reused checkpoint id")
            raise ReusedCheckpointId(cid, recorded.plan, plan, self.store.location)
        # The replay's tasks should have written nothing. Whatever they did write is a second
        # copy of the checkpoint: committing it would duplicate it, so abort it.
        self.abort(cid, batch, reason="replay of a decided checkpoint")
        if not self.store.is_confirmed(cid):
            self.notify_complete(recorded)
        return recorded

    def recover_decided(self) -> tuple[CheckpointId, ...]:
        """R1: steps 4-5 for every decided, unconfirmed checkpoint, oldest first.

        Always safe: it only commits what a durable decision names. The Spark sink calls it
        as soon as a restarted query builds its writer, before any task runs, so a decided
        batch becomes visible without waiting for its replay.
        """
        recommitted: list[CheckpointId] = []
        for cid in self.store.unconfirmed_ids():
            snapshot = self.store.get(cid)
            if snapshot is not None:
                # The crash came between step 3 and step 5, so any subset of these commits
                # happened. Commit all again; skipping this would lose a decided checkpoint.
                self.notify_complete(snapshot)
                recommitted.append(cid)
        return tuple(recommitted)

    def notify_complete(self, snapshot: Snapshot) -> None:
        """Steps 4-5 for a decision that is already durable."""
        # Step 4: notify-complete; only now may output become visible. One failure does not
        # stop the others: the decision is durable, so each commit is correct on its own.
        failures = self.committer.commit_all(snapshot.committables)
        if failures:
            failed = tuple(tid for tid, _ in failures)
            errors = tuple(exc for _, exc in failures)
            raise CheckpointCommitFailed(
                snapshot.checkpoint_id, failed, repr(errors[0]), errors
            ) from errors[0]
        # Step 5: confirm, so recovery never commits these (soon reused) transactional ids again.
        self.store.confirm(snapshot.checkpoint_id, confirmed_at_ms=self._now_ms())
        try:
            self.store.prune()
        except Exception as exc:
            # Housekeeping: the batch is committed and confirmed. Raising here would fail the
            # Spark query for a batch that landed; the next prune() retries the deletes.
            _log.warning("pruning old decisions in %s failed: %r", self.store.location, exc)

    def abort(
        self, checkpoint_id: int, committables: Iterable[Committable], *, reason: str = "requested"
    ) -> None:
        """Abort notification, e.g. Spark's ``DataSourceStreamWriter.abort(messages, batchId)``.

        Never aborts a decided transaction: Spark also calls ``abort()`` when ``commit()``
        raised after step 3, and aborting then would drop a pre-committed, decided batch; those
        are left to recovery, which commits them. With ``sweeps_lingering`` the transactions
        of attempts that never reported back (killed, lost with their executor, zombies) are
        aborted too, so that they do not hold back readers until their timeout. Failures are
        logged, not raised: the checkpoint is aborted either way, and recovery or Kafka's
        transaction timeout rolls a leftover back. If the decisions cannot be read, nothing is
        aborted, for the same reason.
        """
        cid = as_checkpoint_id(checkpoint_id)
        batch = tuple(c for c in committables if not c.wrote_nothing)
        try:
            decided = self._decided_committables(cid)
        except Exception as exc:
            # Unreadable store: cid may be decided, and aborting blindly could drop a decided
            # batch. Raising is no better (abort is best effort). Leaving them open is safe:
            # recovery commits the decided ones and aborts the rest once the store reads again.
            ids = [c.transactional_id for c in batch]
            _log.warning(
                "abort(%s, %s) aborted nothing: cannot read the decisions in %s (%r); "
                "recovery will commit or abort %s",
                cid, reason, self.store.location, exc, ids,
            )  # fmt: skip
            return
        keys = {c.key for c in decided}
        for committable in batch:
            if committable.key in keys:
                _log.warning("abort(%s) skipped decided %s", cid, committable.transactional_id)
                continue
            try:
                self.committer.abort(committable)
            except Exception:
                _log.warning(
                    "abort of %s (%s) failed", committable.transactional_id, reason, exc_info=True
                )
        if self.sweeps_lingering:
            try:
                self.committer.abort_lingering(decided)
            except Exception:
                _log.warning("aborting lingering transactions (%s) failed", reason, exc_info=True)

    def _decided_committables(self, cid: CheckpointId) -> tuple[Committable, ...]:
        """Every committable that a decision names and recovery may still commit: those of
        the unconfirmed decisions, and of ``cid``'s own decision."""
        ids = set(self.store.unconfirmed_ids()) | {cid}
        snapshots = (self.store.get(i) for i in sorted(ids))
        return tuple(c for s in snapshots if s is not None for c in s.committables)

    def recover(self) -> Recovery:
        """R1, then R2 over the whole scope, then returns the latest snapshot for R3 (the
        caller's source resumes from it). Idempotent: a crash inside recover() is fixed by
        calling it again. Call before any participant begins a transaction."""
        recommitted = self.recover_decided()
        latest = self.store.latest()
        decided = () if latest is None else latest.committables
        # R2: whatever else is open was never decided: presumed abort. Only after R1, so every
        # decided transaction is committed before anything in its scope is rolled back.
        self.committer.abort_lingering(decided)
        return Recovery(latest, recommitted)

    def _now_ms(self) -> int:
        return int(self._wall_clock() * 1000)
