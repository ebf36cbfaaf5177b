"""The reference checkpoint coordinator, which the Spark sink does not use: it triggers
checkpoints and collects pre-commit acknowledgements.

Protocol of one checkpoint (steps 3-5 and recovery live in :mod:`checkpoint.two_phase_commit`):

1. Trigger: a new checkpoint id; the engine records the source offsets and sends barriers
   (in Spark: the driver plans micro-batch N and writes ``offsets/N``).
2. Acknowledge: each participant pre-commits when the barrier reaches it and acknowledges with
   its committable (Spark: a task ends and returns its commit message). A decline, a timeout or
   a crash before step 3 aborts the checkpoint: presumed abort, nothing was decided.
3. Decide: the snapshot (offsets + every committable) is written to the store, durably.
4. Notify complete: each committable is committed. Never before step 3.
5. Confirm: recovery will leave these transactions alone.

Driven in-process: :meth:`Coordinator.trigger`, then :meth:`~Coordinator.acknowledge` or
:meth:`~Coordinator.decline` per participant, :meth:`~Coordinator.tick` for timeouts, and
:meth:`~Coordinator.recover` at start-up. It is the reference model of an engine that runs
several checkpoints at once, which the property tests drive; each decision goes through the
same :class:`TwoPhaseCommit` as the Spark sink's, which needs no coordinator in memory (all
acknowledgements arrive at once in ``commit(messages, N)``) and calls it directly.

Only in-flight acknowledgements live in memory; losing them in a crash is a presumed abort.
Not thread-safe: drive one coordinator from one thread.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from checkpoint.deadline import Clock, Deadline
from checkpoint.errors import (
    AbortReason,
    CheckpointAborted,
    CheckpointRejected,
    CheckpointTimeout,
    ConfigError,
    ProtocolError,
)
from checkpoint.model import CheckpointId, Committable, Snapshot, SourceOffset, as_checkpoint_id
from checkpoint.participant import Committer
from checkpoint.store import SnapshotStore
from checkpoint.two_phase_commit import Recovery, SourceOffsets, TwoPhaseCommit

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CoordinatorConfig:
    """Settings, in seconds; cross-field rules go in :meth:`_sanity_check`.

    ``max_concurrent > 1`` is supported: decisions are still taken in id order, and aborting a
    checkpoint aborts the younger ones too. Spark runs one micro-batch at a time: keep 1.
    """

    pipeline_id: str = "kafka-eos"
    timeout: float = 600.0
    min_pause: float = 0.0
    max_concurrent: int = 1

    def __post_init__(self) -> None:
        self._sanity_check()

    def _sanity_check(self) -> None:
        if not isinstance(self.pipeline_id, str) or not self.pipeline_id:
            raise ConfigError(f"pipeline_id must be a non-empty str, got {self.pipeline_id!r}")
        if not self.timeout > 0:
            raise ConfigError(f"timeout must be > 0 seconds, got {self.timeout!r}")
        if not self.min_pause >= 0:
            raise ConfigError(f"min_pause must be >= 0 seconds, got {self.min_pause!r}")
        if not isinstance(self.max_concurrent, int) or self.max_concurrent < 1:
            raise ConfigError(f"max_concurrent must be an int >= 1, got {self.max_concurrent!r}")


@dataclass
class _Pending:
    checkpoint_id: CheckpointId
    expected: frozenset[str]
    source_offsets: tuple[SourceOffset, ...]
    deadline: Deadline
    triggered_at_ms: int
    acks: dict[str, Committable | None] = field(default_factory=dict)

    def missing(self) -> tuple[str, ...]:
        return tuple(sorted(self.expected - self.acks.keys()))

    def committables(self) -> tuple[Committable, ...]:
        return tuple(c for c in self.acks.values() if c is not None)


class Coordinator:
    """Runs the protocol against a :class:`SnapshotStore` and a :class:`Committer`.

    >>> import tempfile
    >>> from checkpoint.testing import InMemoryBroker, InMemoryParticipant, ManualClock
    >>> broker = InMemoryBroker()
    >>> task = InMemoryParticipant(broker, "app-0")
    >>> store = SnapshotStore(tempfile.mkdtemp())
    >>> coordinator = Coordinator(store, InMemoryParticipant(broker, "app"), clock=ManualClock())
    >>> coordinator.recover().snapshot is None          # a fresh start: nothing to resume
    True
    >>> cid = coordinator.trigger(["app-0"], source_offsets={("in", 0): 42})   # Step 1
    >>> task.begin_transaction(cid); task.write(cid, "out-1")
    >>> [s.offsets() for s in coordinator.acknowledge(cid, "app-0", task.pre_commit(cid))]
    [{('in', 0): 42}]
    >>> broker.visible
    ['out-1']
    """

    def __init__(
        self,
        store: SnapshotStore,
        committer: Committer,
        config: CoordinatorConfig | None = None,
        *,
        clock: Clock = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config or CoordinatorConfig()
        self.commit_protocol = TwoPhaseCommit(
            store, committer, pipeline_id=self.config.pipeline_id, wall_clock=wall_clock
        )
        self.store = store
        self._clock = clock
        self._wall_clock = wall_clock
        self._pending: dict[CheckpointId, _Pending] = {}  # insertion order is id order
        self._last_id: int | None = None  # None until recover(): trigger() needs it
        self._last_finished_at: float | None = None
        self._needs_recovery = False

    @property
    def pending_ids(self) -> tuple[CheckpointId, ...]:
        return tuple(self._pending)

    def trigger(
        self,
        participants: Iterable[str],
        *,
        source_offsets: SourceOffsets = (),
        checkpoint_id: int | None = None,
    ) -> CheckpointId:
        """Step 1: start a checkpoint expecting an acknowledgement from each participant name.

        Raises :class:`CheckpointRejected` while the minimum pause has not elapsed, while
        ``max_concurrent`` checkpoints are in flight, or until ``recover()`` has completed
        (at start, and after a failed commit); :class:`ProtocolError` for a bare str.
        """
        if self._needs_recovery or self._last_id is None:
            raise CheckpointRejected(
                "recover() has not completed since the start or since a failed commit; call it: "
                "it commits decided checkpoints and aborts transactions left by a previous run"
            )
        if len(self._pending) >= self.config.max_concurrent:
            in_flight = f"{len(self._pending)} checkpoint(s) in flight"
            raise CheckpointRejected(f"{in_flight}, max_concurrent={self.config.max_concurrent}")
        if self._last_finished_at is not None:
            waited = self._clock() - self._last_finished_at
            if waited < self.config.min_pause:
                pause = f"min_pause={self.config.min_pause} s since the last checkpoint ended"
                raise CheckpointRejected(pause, retry_after=self.config.min_pause - waited)
        if isinstance(participants, str):
            # frozenset("app-0") would expect participants "a", "p", "-", "0": never complete.
            raise ProtocolError(
                f"trigger() takes an iterable of participant names, got the str {participants!r}; "
                f"pass [{participants!r}]"
            )
        expected = frozenset(participants)
        if not expected:
            raise ProtocolError("trigger() needs at least one participant name")
        cid = as_checkpoint_id(self._last_id + 1 if checkpoint_id is None else checkpoint_id)
        if cid <= self._last_id:
            raise ProtocolError(f"checkpoint ids must increase: got {cid} after {self._last_id}")
        # Step 1: the checkpoint lives only in memory until step 3; a crash before then is a
        # presumed abort, and recover() rolls back whatever the participants pre-committed.
        offsets = Snapshot.offsets_from(source_offsets)
        deadline = Deadline(self.config.timeout, clock=self._clock)
        self._pending[cid] = _Pending(cid, expected, offsets, deadline, self._now_ms())
        self._last_id = cid
        return cid

    def acknowledge(
        self, checkpoint_id: int, participant: str, committable: Committable | None
    ) -> list[Snapshot]:
        """Step 2: ``participant`` pre-committed (``None``: it wrote nothing).

        Returns the snapshots this acknowledgement completed, oldest first: decisions are taken
        in id order, so one acknowledgement may complete several checkpoints. Raises
        :class:`CheckpointAborted` if the checkpoint had been aborted (the committable is rolled
        back), :class:`CheckpointCommitFailed` if step 4 failed (call ``recover()``), and
        :class:`CheckpointRejected` after such a failure until ``recover()`` has completed.
        """
        cid = as_checkpoint_id(checkpoint_id)
        if self._needs_recovery:
            # An older decision is not fully committed (or may not be durable): deciding and
            # committing a younger checkpoint now would make its output visible first, out of
            # order. recover() finishes the older one and aborts the in-flight ones.
            raise CheckpointRejected(
                f"{cid} (from {participant!r}): a commit failed and recover() has not "
                "completed since; call recover() (it aborts this checkpoint), then replay it",
                refused="acknowledged",
            )
        pending = self._pending.get(cid)
        if pending is None:
            recorded = self.store.get(cid)
            if recorded is not None and committable in (None, *recorded.committables):
                return []  # a duplicate of an acknowledgement that is already decided
            # Step 2, too late: no decision can name this committable any more, so rolling it
            # back is safe, and needed: left open it would block read_committed consumers.
            self.commit_protocol.abort(cid, [] if committable is None else [committable])
            raise CheckpointAborted(cid, AbortReason.STALE, "acknowledged after it ended")
        if participant not in pending.expected:
            raise ProtocolError(
                f"checkpoint {cid} expects {sorted(pending.expected)}, not {participant!r}"
            )
        if pending.acks.get(participant, committable) != committable:
            raise ProtocolError(f"{participant!r} acknowledged checkpoint {cid} twice, differently")
        pending.acks[participant] = committable
        decided, aborted = self._complete_ready()
        if aborted and aborted[0] == cid:
            raise CheckpointTimeout(cid, self.config.timeout, pending.missing())
        if cid in aborted:
            raise CheckpointAborted(cid, AbortReason.PREDECESSOR_ABORTED, f"{aborted[0]} timed out")
        return decided

    def decline(self, checkpoint_id: int, participant: str, reason: str) -> list[CheckpointId]:
        """Step 2 failed: ``participant`` could not pre-commit. Aborts the checkpoint and the
        younger ones (their offsets build on it); returns the aborted ids."""
        cid = as_checkpoint_id(checkpoint_id)
        if cid not in self._pending:
            return []
        _log.warning("checkpoint %s declined by %s: %s", cid, participant, reason)
        return self._abort_from(cid, AbortReason.DECLINED)

    def tick(self) -> list[CheckpointId]:
        """Abort the checkpoints past their timeout; call it periodically. Returns their ids."""
        for pending in self._pending.values():
            if pending.deadline.expired():
                _log.warning(
                    "checkpoint %s timed out; missing %s", pending.checkpoint_id, pending.missing()
                )
                return self._abort_from(pending.checkpoint_id, AbortReason.TIMEOUT)
        return []

    def recover(self) -> Recovery:
        """Abort the in-flight checkpoints, then recovery R1-R3 (:meth:`TwoPhaseCommit.recover`).

        Call at every (re)start before any participant begins a transaction, and after a
        :class:`CheckpointCommitFailed`. A crash inside is fixed by calling it again.
        """
        aborted = (
            self._abort_from(min(self._pending), AbortReason.RECOVERY) if self._pending else []
        )
        recovery = self.commit_protocol.recover()
        self._needs_recovery = False
        newest = -1 if recovery.snapshot is None else recovery.snapshot.checkpoint_id
        self._last_id = max(newest, -1 if self._last_id is None else self._last_id)
        return Recovery(recovery.snapshot, recovery.recommitted, tuple(aborted))

    def _complete_ready(self) -> tuple[list[Snapshot], list[CheckpointId]]:
        decided: list[Snapshot] = []
        while self._pending:
            oldest = next(iter(self._pending.values()))
            if oldest.deadline.expired():
                return decided, self._abort_from(oldest.checkpoint_id, AbortReason.TIMEOUT)
            if oldest.missing():
                break  # a younger complete checkpoint waits: decisions are taken in id order
            del self._pending[oldest.checkpoint_id]
            self._last_finished_at = self._clock()
            try:
                # Steps 3-5: write the decision, then (never before) notify-complete.
                decided.append(
                    self.commit_protocol.complete(
                        oldest.checkpoint_id,
                        oldest.committables(),
                        source_offsets=oldest.source_offsets,
                        triggered_at_ms=oldest.triggered_at_ms,
                    )
                )
            except Exception:
                # Decided but not committed (CheckpointCommitFailed), or the store failed and
                # the decision may or may not be durable: only recover() can tell, by reading it.
                self._needs_recovery = True
                raise
        return decided, []

    def _abort_from(self, cid: CheckpointId, reason: AbortReason) -> list[CheckpointId]:
        # Younger checkpoints go too: their offsets build on this one, so deciding them would
        # skip its input (data loss).
        victims = [p for p in self._pending.values() if p.checkpoint_id >= cid]
        for pending in victims:
            del self._pending[pending.checkpoint_id]
            why = reason if pending.checkpoint_id == cid else AbortReason.PREDECESSOR_ABORTED
            _log.info("checkpoint %s aborted (%s)", pending.checkpoint_id, why.value)
            self.commit_protocol.abort(pending.checkpoint_id, pending.committables(), reason=why)
        self._last_finished_at = self._clock()
        return [p.checkpoint_id for p in victims]

    def _now_ms(self) -> int:
        return int(self._wall_clock() * 1000)
