"""Property test of the in-process coordinator under random schedules and faults.

Hypothesis drives 1-4 participants through random interleavings of triggers, pre-commit
acknowledgements, declines, clock jumps (timeouts), transient failures and crashes at every
I/O step (including between the decision write and notify, and between two commits of one
notify), restarts and recoveries. Invariants:

* nothing is visible before a durable decision names it, nor before every older decision's
  output is (checked at the instant of commit);
* no decided transaction is ever aborted; a commit fails only from an injected failure;
* no record is ever visible twice; an aborted checkpoint's output is never visible, nor is
  a checkpoint that was in flight when an older one aborted ever decided;
* the newest decision is never lost, nor any decision that is not yet confirmed;
* after a successful recovery every decided checkpoint's output is visible and nothing lingers.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TypeVar
from unittest import mock

import pytest
from checkpoint_faults import (
    Fault,
    FaultyCommitter,
    InjectedFailure,
    Key,
    LedgerMachine,
    SeededBug,
    SimulatedCrash,
    assert_seeded_bug_found,
    check_commit_failed,
    committed_keys,
    duplicates,
    fault_strategy,
    hunt,
    named,
    named_as,
    newest_key,
    open_store,
)
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, precondition, rule

from checkpoint.errors import (
    CheckpointAborted,
    CheckpointCommitFailed,
    CheckpointRejected,
    ParticipantFenced,
)
from checkpoint.model import CheckpointId, Committable
from checkpoint.reference_coordinator import Coordinator, CoordinatorConfig
from checkpoint.testing import InMemoryParticipant, ManualClock
from checkpoint.two_phase_commit import TwoPhaseCommit

T = TypeVar("T")


def alive(machine: CoordinatorMachine) -> bool:
    return machine.coordinator is not None


def waiting(machine: CoordinatorMachine) -> bool:
    return machine.coordinator is not None and bool(machine.open)


class CoordinatorMachine(LedgerMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock()
        self.coordinator: Coordinator | None = None
        self.open: dict[tuple[int, str], Key | None] = {}  # not yet answered: its transaction
        self.attempts: dict[int, set[Key]] = {}  # transactions of undecided checkpoints
        self.offset = 0

    @initialize(
        participants=st.integers(1, 4),
        max_concurrent=st.integers(1, 3),
        min_pause=st.sampled_from([0.0, 2.0]),
        timeout=st.sampled_from([5.0, 20.0]),
        retain=st.integers(1, 3),
    )
    def setup(
        self, participants: int, max_concurrent: int, min_pause: float, timeout: float, retain: int
    ) -> None:
        self.names = [f"app-{i}" for i in range(participants)]
        self.config = CoordinatorConfig(
            timeout=timeout, min_pause=min_pause, max_concurrent=max_concurrent
        )
        self.retain = retain
        self.restart_process()

    # -- the process -----------------------------------------------------------------------

    def restart_process(self) -> None:
        store = open_store(self.files, self.retain, self.faults, self.ledger)
        committer = FaultyCommitter(InMemoryParticipant(self.broker, "app"), self.faults)
        self.writers = {name: InMemoryParticipant(self.broker, name) for name in self.names}
        self.coordinator = Coordinator(store, committer, self.config, clock=self.clock)
        self.recover()

    def call(self, action: Callable[..., T], *args: object) -> T | None:
        """Run one coordinator call; a crash kills the process, expected errors are absorbed."""
        try:
            return action(*args)
        except SimulatedCrash as crash:
            event(f"crash {crash.where}")
            self.coordinator = None
            self.open.clear()  # the tasks died with it; their transactions linger
        except CheckpointCommitFailed as error:
            check_commit_failed(error)
        except (CheckpointAborted, CheckpointRejected, InjectedFailure):
            pass
        finally:
            self.resolve()
        return None

    def resolve(self) -> None:
        """Checkpoints that left the coordinator undecided are aborted: doom their output."""
        pending = set(self.coordinator.pending_ids) if self.coordinator else set()
        for cid in [c for c in self.attempts if c not in pending]:
            self.ledger.doomed_keys |= self.attempts.pop(cid) - self.ledger.decided_keys
            if cid not in self.ledger.decided:  # the younger in-flight ones build on it
                self.ledger.doomed_ids |= {c for c in self.attempts if c > cid}

    def recover(self) -> None:
        assert self.coordinator is not None
        recovery = self.call(self.coordinator.recover)
        if recovery is None:
            return
        event(f"recovery re-committed {len(recovery.recommitted)} checkpoint(s)")
        self.open.clear()  # recovery aborted (fenced) every in-flight transaction
        self.recovery_commits_every_decision_and_leaves_nothing_open()

    # -- rules -----------------------------------------------------------------------------

    RECORDS = st.lists(st.integers(0, 2), min_size=4, max_size=4)  # per participant; 0: none

    @precondition(alive)
    @rule(records=RECORDS)
    def trigger(self, records: list[int]) -> None:
        self.start_checkpoint(records)

    FAULT = fault_strategy(16)  # reaches the prune of a 4-participant checkpoint

    @precondition(alive)
    @rule(records=RECORDS, data=st.data(), fault=st.none() | FAULT)
    def run_checkpoint(self, records: list[int], data: st.DataObject, fault: Fault | None) -> None:
        """A whole checkpoint: trigger, then every barrier arrives, in a random order; a fault
        may hit any I/O step of its decide, notify, confirm or prune."""
        if fault is not None:
            self.faults.arm(fault)
        cid = self.start_checkpoint(records)
        while self.coordinator is not None and any(c == cid for c, _ in self.open):
            self.barrier(data.draw(st.sampled_from([p for p in sorted(self.open) if p[0] == cid])))

    @precondition(waiting)
    @rule(data=st.data(), count=st.integers(1, 4), fault=st.none() | FAULT)
    def acknowledge(self, data: st.DataObject, count: int, fault: Fault | None) -> None:
        """Up to ``count`` barriers reach their participants, in a random order; a fault may
        hit the decisions they complete, while younger checkpoints still wait."""
        if fault is not None:
            self.faults.arm(fault)
        for _ in range(count):
            if self.coordinator is None or not self.open:
                return
            self.barrier(data.draw(st.sampled_from(sorted(self.open))))

    @precondition(waiting)
    @rule(data=st.data(), abort_own=st.booleans())
    def decline(self, data: st.DataObject, abort_own: bool) -> None:
        assert self.coordinator is not None
        cid, name = data.draw(st.sampled_from(sorted(self.open)))
        if abort_own:
            with contextlib.suppress(ParticipantFenced):
                committable = self.pre_commit(cid, name)
                if committable is not None:
                    self.writers[name].abort(committable)
        else:
            del self.open[(cid, name)]  # it dies; its transaction lingers
        self.call(self.coordinator.decline, cid, name, "injected")

    @rule(seconds=st.sampled_from([0.5, 1.0, 2.0, 30.0]))
    def advance_clock(self, seconds: float) -> None:
        self.clock.advance(seconds)
        if self.coordinator is not None:
            self.call(self.coordinator.tick)

    @rule(fault=FAULT)
    def arm_fault(self, fault: Fault) -> None:
        self.faults.arm(fault)

    @precondition(alive)
    @rule()
    def crash(self) -> None:
        self.coordinator = None
        self.open.clear()
        self.resolve()

    @precondition(lambda self: self.coordinator is None)
    @rule()
    def restart(self) -> None:
        self.restart_process()

    @precondition(alive)
    @rule()
    def recover_live(self) -> None:
        self.recover()

    @rule()
    @named_as("once_faults_stop_a_checkpoint_completes")
    def faults_stop_and_a_checkpoint_completes(self) -> None:
        """Liveness: the invariants hold for a coordinator that decides nothing (every error
        above is absorbed), so once faults stop, after the waiting barriers arrive, recovery
        runs (as the engine's restart after a failed commit does) and the timeouts pass, a new
        checkpoint must be decided and its output visible."""
        self.faults.crash_in = self.faults.fail_in = None
        if self.coordinator is None:
            self.restart_process()
        while self.open:
            self.barrier(sorted(self.open)[0])
        self.recover()
        self.advance_clock(self.config.timeout + self.config.min_pause)
        cid = self.start_checkpoint([1] * len(self.names))
        assert cid is not None, "with no fault armed the coordinator refused a checkpoint"
        while any(c == cid for c, _ in self.open):
            self.barrier(min(p for p in self.open if p[0] == cid))
        assert cid in self.ledger.decided, f"checkpoint {cid} was never decided"
        assert self.attempts.get(cid, set()) <= committed_keys(self.broker), "not visible"

    def start_checkpoint(self, records: list[int]) -> int | None:
        """Step 1, then each participant begins its transaction and writes its records."""
        assert self.coordinator is not None
        self.offset += 1
        offsets = {("in", 0): self.offset}
        cid = self.call(lambda: self.coordinator.trigger(self.names, source_offsets=offsets))
        if cid is None:
            return None
        self.attempts[cid] = set()
        self.ledger.doomed_ids.discard(cid)  # a new attempt: ids of undecided ones are reused
        for name, count in zip(self.names, records, strict=False):
            key = None
            if count:  # a participant with no output opens no transaction and acks None
                self.writers[name].begin_transaction(cid)
                for seq in range(count):
                    self.writers[name].write(cid, (name, cid, seq))
                key = newest_key(self.broker, f"{name}-{cid}")
                self.attempts[cid].add(key)
            self.open[(cid, name)] = key
        return cid

    def barrier(self, pair: tuple[int, str]) -> None:
        """Step 2: the barrier reaches a participant; it pre-commits and acknowledges."""
        assert self.coordinator is not None
        cid, name = pair
        try:
            committable = self.pre_commit(cid, name)
        except ParticipantFenced:  # recovery aborted its transaction: a zombie must stop
            self.call(self.coordinator.decline, cid, name, "fenced")
            return
        for snapshot in self.call(self.coordinator.acknowledge, cid, name, committable) or []:
            event("checkpoint completed")
            self.a_completed_checkpoint_is_visible({c.key for c in snapshot.committables})

    @named
    def a_completed_checkpoint_is_visible(self, keys: set[Key]) -> None:
        assert keys <= committed_keys(self.broker), "acknowledged but not visible"

    def pre_commit(self, cid: int, name: str) -> Committable | None:
        """The barrier reaches ``name``: it flushes and hands over its committable."""
        key = self.open.pop((cid, name))
        return None if key is None else self.writers[name].pre_commit(cid)

    # -- invariants ------------------------------------------------------------------------

    @invariant()
    @named
    def output_is_visible_at_most_once(self) -> None:
        assert not duplicates(self.broker)

    @invariant()
    @named
    def aborted_output_is_never_visible(self) -> None:
        assert not committed_keys(self.broker) & self.ledger.doomed_keys

    @invariant()
    @named
    def decisions_are_never_lost(self) -> None:
        if not self.ledger.decided:
            return
        ids = self.reader.checkpoint_ids()
        assert ids and ids[-1] == max(self.ledger.decided), (ids, sorted(self.ledger.decided))
        assert self.reader.latest() == self.ledger.decided[ids[-1]]
        assert set(self.ledger.decided) - self.ledger.confirmed <= set(ids), "pruned too early"


CoordinatorMachine.TestCase.settings = settings(stateful_step_count=20)  # on top of the profile
TestCoordinatorProperties = CoordinatorMachine.TestCase


def _abort_only_the_checkpoint(
    coordinator: Coordinator, cid: CheckpointId, reason: object
) -> list[CheckpointId]:
    """``_abort_from`` that spares the younger checkpoints, whose offsets build on it."""
    pending = coordinator._pending.pop(cid)
    coordinator.commit_protocol.abort(cid, pending.committables(), reason=reason)  # type: ignore[arg-type]
    coordinator._last_finished_at = coordinator._clock()
    return [cid]


SEEDED_BUDGET = 1000
SEEDED_BUGS = {
    # An aborted checkpoint's younger, in-flight ones are decided: their output skips its input.
    "younger checkpoints survive an abort": SeededBug(
        "nothing_visible_before_its_decision_is_durable",
        (mock.patch.object(Coordinator, "_abort_from", _abort_only_the_checkpoint),),
    ),
    # Recovery forgets the decided, unconfirmed checkpoints.
    "recovery commits no decision": SeededBug(
        "recovery_commits_every_decision_and_leaves_nothing_open",
        (mock.patch.object(TwoPhaseCommit, "recover_decided", lambda p: ()),),
    ),
    # Liveness: no checkpoint is ever decided; nothing unsafe ever happens.
    "a coordinator that never decides": SeededBug(
        "once_faults_stop_a_checkpoint_completes",
        (mock.patch.object(Coordinator, "_complete_ready", lambda c: ([], [])),),
    ),
}
# Of seeds 0-7, the one that finds each bug soonest (`make power`: docs/testing.md).
SEEDS = {
    "younger checkpoints survive an abort": 2,
    "recovery commits no decision": 3,
    "a coordinator that never decides": 0,
}


def hunt_bug(bug: str, at_seed: int) -> tuple[str | None, int]:
    """The invariant ``bug`` breaks from ``at_seed`` within the budget, and the schedules."""
    return hunt(CoordinatorMachine, SEEDED_BUGS[bug], at_seed, budget=SEEDED_BUDGET, steps=20)


@pytest.mark.parametrize("bug", sorted(SEEDED_BUGS))
def test_a_seeded_bug_in_the_coordinator_is_found(bug: str) -> None:
    """Each bug breaks the invariant it is meant to break, by name, from a fixed seed."""
    assert_seeded_bug_found(bug, SEEDED_BUGS, SEEDS, hunt_bug)
