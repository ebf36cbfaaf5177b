"""Steps 3-5 and recovery of the protocol (see :mod:`checkpoint.coordinator` for steps 1-2).

3. Decide: the snapshot (offsets + every committable) is written to the store. This is the
   commit point: once it is durable the checkpoint is complete, whatever crashes next.
4. Notify complete: each committable is committed; commit is idempotent.
5. Confirm: a confirmation is written so recovery leaves these transactions alone; old
   decisions are pruned.

Recovery, at every (re)start and after a failed step 4:

R1. Every decided but unconfirmed checkpoint goes through steps 4-5 again.
R2. The committer aborts every other lingering transaction (presumed abort; fences zombies).
R3. The caller's source resumes from the latest snapshot, returned in :class:`Recovery`.

:class:`TwoPhaseCommit` keeps no state between calls; every call reads and writes the store.
That is what the Spark sink needs: ``DataSourceStreamWriter.commit(messages, N)`` and
``abort(messages, N)`` may each run in a fresh driver-side Python process.

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

from checkpoint.errors import AbortReason, CheckpointAborted, CheckpointCommitFailed, ProtocolError
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
    """Decide, notify, confirm and recover, against a store and a committer."""

    def __init__(
        self,
        store: SnapshotStore,
        committer: Committer,
        *,
        pipeline_id: str = "kafka-eos",
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.committer = committer
        self.pipeline_id = pipeline_id
        self._wall_clock = wall_clock

    def complete(
        self,
        checkpoint_id: int,
        committables: Iterable[Committable],
        *,
        source_offsets: SourceOffsets = (),
        triggered_at_ms: int | None = None,
    ) -> Snapshot:
        """Steps 3-5, once every participant acknowledged ``checkpoint_id``.

        In Spark: ``DataSourceStreamWriter.commit(messages, batchId)``. If the checkpoint is
        already decided (Spark replays batch N after a crash between step 3 and ``commits/N``),
        the recorded decision wins: its commits are re-driven and it is returned.
        Raises :class:`CheckpointCommitFailed` if step 4 failed; the decision stands.
        """
        cid = as_checkpoint_id(checkpoint_id)
        batch = tuple(committables)
        if len({c.transactional_id for c in batch}) != len(batch):
            raise ProtocolError(f"checkpoint {cid} names a transactional id twice: {batch!r}")
        recorded = self.store.get(cid)
        if recorded is not None:
            # The replay's tasks should have written nothing. Whatever they did write is a
            # second copy of the batch: committing it would duplicate the batch, so abort it.
            self.abort(cid, batch, reason="replay of a decided checkpoint")
            if not self.store.is_confirmed(cid):
                self.notify_complete(recorded)
            return recorded
        newest = max(self.store.checkpoint_ids(), default=-1)
        if cid < newest:
            # Deciding an older checkpoint after a newer one would reorder output. Spark never
            # does this, so it is a caller bug or a second writer on the same location.
            self.abort(cid, batch, reason=AbortReason.STALE)
            raise CheckpointAborted(cid, AbortReason.STALE, f"checkpoint {newest} is decided")
        offsets = Snapshot.offsets_from(source_offsets)
        now = self._now_ms()
        snapshot = Snapshot(cid, self.pipeline_id, batch, offsets, triggered_at_ms, now)
        # Step 3: the commit point. Until this write returns a crash means abort; after it,
        # aborting any of these committables would drop a pre-committed, decided batch.
        self.store.write(snapshot)
        self.notify_complete(snapshot)
        return snapshot

    def notify_complete(self, snapshot: Snapshot) -> None:
        """Steps 4-5 for a decision that is already durable."""
        failures: list[tuple[Committable, Exception]] = []
        # Step 4: notify-complete; only now may output become visible. Keep going after a
        # failure: the decision is durable, so each commit is correct on its own.
        for committable in snapshot.committables:
            try:
                self.committer.commit(committable)
            except Exception as exc:
                failures.append((committable, exc))
        if failures:
            failed = tuple(c.transactional_id for c, _ in failures)
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
        are left to :meth:`recover`, which commits them. Failures are logged, not raised: the
        checkpoint is aborted either way, and recover() or Kafka's transaction timeout rolls a
        leftover back. If the decision cannot be read, nothing is aborted, for the same reason.
        """
        cid = as_checkpoint_id(checkpoint_id)
        batch = tuple(committables)
        try:
            recorded = self.store.get(cid) if batch else None
        except Exception as exc:
            # Unreadable store: cid may be decided, and aborting blindly could drop a decided
            # batch. Raising is no better (abort is best effort). Leaving them open is safe:
            # recover() commits the decided ones and aborts the rest once the store reads again.
            ids = [c.transactional_id for c in batch]
            _log.warning(
                "abort(%s, %s) aborted nothing: cannot read its decision in %s (%r); recover() "
                "will commit or abort %s",
                cid,
                reason,
                self.store.location,
                exc,
                ids,
            )
            return
        keys = set() if recorded is None else {c.key for c in recorded.committables}
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

    def recover(self) -> Recovery:
        """R1-R2, then returns the latest snapshot for R3. Idempotent: a crash inside recover()
        is fixed by calling it again. Call before any participant begins a transaction."""
        recommitted: list[CheckpointId] = []
        decided: list[Committable] = []
        for cid in self.store.unconfirmed_ids():
            snapshot = self.store.get(cid)
            if snapshot is not None:
                # R1: the crash came between step 3 and step 5, so any subset of these commits
                # happened. Commit all again; skipping this would lose a decided batch.
                self.notify_complete(snapshot)
                recommitted.append(cid)
                decided.extend(snapshot.committables)
        latest = self.store.latest()
        if latest is not None:
            decided.extend(c for c in latest.committables if c not in decided)
        # R2: whatever else is open was never decided: presumed abort. Only after R1, so every
        # decided transaction is committed before anything in its scope is rolled back.
        self.committer.recover(tuple(decided))
        # R3 is the caller's: rewind the sources to latest.source_offsets.
        return Recovery(latest, tuple(recommitted))

    def _now_ms(self) -> int:
        return int(self._wall_clock() * 1000)
