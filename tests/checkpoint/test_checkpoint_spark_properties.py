"""Property test of the split form, driven the way Spark drives the Kafka sink.

Spark is modelled after its micro-batch loop: batch N is planned (``offsets/N``), tasks run and
pre-commit (a task attempt may die before or after pre-commit and be retried), the driver calls
``commit(messages, N)`` (:meth:`TwoPhaseCommit.complete`) and then writes ``commits/N``; when
commit raises, Spark calls ``abort(messages, N)`` and the query fails. At restart the sink
recovers before any task runs, and Spark replays batch N, same id and offsets, unless
``commits/N`` exists. Every driver call runs on a fresh :class:`TwoPhaseCommit` and store handle,
as each may run in a new Python worker. Crashes and transient failures can hit any I/O step,
including Spark's own write of ``commits/N``.

A batch's records are a pure function of (batch, task), as a replay from the same offsets is.
End-to-end invariants: every record of every batch in ``commits/`` is visible, and no record is
ever visible twice (exactly once); nothing is visible before its decision is durable, nor before
every older decision is; no decided transaction is ever aborted, checked after every step,
including while the query is down; a commit fails only from an injected failure.
"""

from __future__ import annotations

import contextlib
from unittest import mock

import pytest
from checkpoint_faults import (
    Fault,
    FaultyCommitter,
    InjectedFailure,
    LedgerMachine,
    SeededBug,
    SimulatedCrash,
    assert_seeded_bug_found,
    check_commit_failed,
    duplicates,
    fault_strategy,
    hunt,
    named,
    open_store,
)
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, precondition, rule

from checkpoint.errors import CheckpointCommitFailed
from checkpoint.model import Committable
from checkpoint.testing import InMemoryParticipant
from checkpoint.two_phase_commit import TwoPhaseCommit

FAULT = fault_strategy(14)  # reaches the write of commits/N from the first read of complete()


def rows(batch: int, task: int) -> int:
    """How many records task ``task`` of batch ``batch`` writes; 0 for some tasks."""
    return (batch + task) % 3


def running(machine: SparkMachine) -> bool:
    return machine.query_up


class SparkMachine(LedgerMachine):
    def __init__(self) -> None:
        super().__init__()  # its reader is what an executor opens
        self.batch = 0  # offsets/N: the batch being run
        self.commit_log: set[int] = set()  # commits/N
        self.messages: dict[int, Committable | None] = {}  # finished tasks of batch N
        self.query_up = False

    @initialize(tasks=st.integers(1, 3), retain=st.integers(1, 3))
    def setup(self, tasks: int, retain: int) -> None:
        self.tasks, self.retain = tasks, retain
        self.start_query()

    def driver(self) -> TwoPhaseCommit:
        """A fresh driver-side Python worker: new store handle, committer built from config."""
        store = open_store(self.files, self.retain, self.faults, self.ledger)
        committer = FaultyCommitter(InMemoryParticipant(self.broker, "sink"), self.faults)
        return TwoPhaseCommit(store, committer, sweeps_lingering=True)  # as the Spark sink

    def expected(self, batch: int) -> set[tuple[int, int, int]]:
        return {(batch, t, seq) for t in range(self.tasks) for seq in range(rows(batch, t))}

    def query_fails(self) -> None:
        self.query_up = False
        self.messages = {}

    # -- rules -----------------------------------------------------------------------------

    @precondition(lambda self: not self.query_up)
    @rule()
    def start_query(self) -> None:
        """Query (re)start: the sink recovers, then Spark replays batch N (no commits/N)."""
        try:
            recovery = self.driver().recover()
        except CheckpointCommitFailed as error:
            check_commit_failed(error)
            return  # the query stays down; the next start recovers again
        except (SimulatedCrash, InjectedFailure):
            return
        event(f"recovery re-committed {len(recovery.recommitted)} batch(es)")
        self.recovery_commits_every_decision_and_leaves_nothing_open()
        self.query_up = True

    DIES = st.sampled_from([None, None, "before", "after"])

    @precondition(running)
    @rule(dies=st.lists(DIES, min_size=3, max_size=3), fault=st.none() | FAULT)
    def run_batch(self, dies: list[str | None], fault: Fault | None) -> None:
        """A whole micro-batch: every task (a failed attempt is retried once), then commit."""
        for task in range(self.tasks):
            self.run_task(task, dies[task])
            self.run_task(task, None)
        self.commit_batch(fault)

    @precondition(running)
    @rule(task=st.integers(0, 2), dies=DIES)
    def run_task(self, task: int, dies: str | None) -> None:
        """One task attempt on an executor; it may die before or after its pre-commit."""
        task %= self.tasks
        if task in self.messages:
            return
        if self.reader.contains(self.batch):
            event("replayed task of a decided batch")
            self.messages[task] = None  # decided already: produce nothing, commit only confirms
            return
        if rows(self.batch, task) == 0:
            self.messages[task] = None
            return
        writer = InMemoryParticipant(self.broker, f"sink-{task}")  # fences earlier attempts
        writer.begin_transaction(self.batch)
        for seq in range(rows(self.batch, task)):
            writer.write(self.batch, (self.batch, task, seq))
        if dies == "before":
            return  # Spark retries the task; its open transaction is fenced or recovered
        committable = writer.pre_commit(self.batch)
        if dies is None:  # "after": the result never reached the driver; Spark retries
            self.messages[task] = committable

    @precondition(lambda self: self.query_up and len(self.messages) == self.tasks)
    @rule(fault=st.none() | FAULT)
    def commit_batch(self, fault: Fault | None) -> None:
        """Driver: ``commit(messages, N)``, then Spark writes ``commits/N``."""
        if not self.query_up or len(self.messages) != self.tasks:
            return
        if fault is not None:
            self.faults.arm(fault)
        batch, messages = self.batch, [m for m in self.messages.values() if m is not None]
        try:
            self.driver().complete(batch, messages)
            self.faults.step(f"write commits/{batch}", lambda: self.commit_log.add(batch))
        except SimulatedCrash as crash:
            event(f"crash {crash.where}")
            self.query_fails()
            return
        except (CheckpointCommitFailed, InjectedFailure) as error:
            if isinstance(error, CheckpointCommitFailed):
                check_commit_failed(error)
            self.abort_batch(messages)  # what Spark does when commit() raised
            return
        event("batch committed")
        self.a_committed_batch_is_visible(batch)
        self.batch += 1
        self.messages = {}

    @named
    def a_committed_batch_is_visible(self, batch: int) -> None:
        assert self.expected(batch) <= set(self.broker.visible), "committed but not visible"

    @precondition(lambda self: self.query_up and bool(self.messages))
    @rule()
    def job_fails(self) -> None:
        """A task failed for good: Spark aborts the batch with the messages it has."""
        self.abort_batch([m for m in self.messages.values() if m is not None])

    def abort_batch(self, messages: list[Committable]) -> None:
        with contextlib.suppress(SimulatedCrash, InjectedFailure):
            self.driver().abort(self.batch, messages)
        self.query_fails()

    @precondition(running)
    @rule()
    def driver_crash(self) -> None:
        self.query_fails()

    @rule(fault=FAULT)
    def arm_fault(self, fault: Fault) -> None:
        self.faults.arm(fault)

    # -- invariants ------------------------------------------------------------------------

    @invariant()
    @named
    def every_committed_batch_is_visible_exactly_once(self) -> None:
        assert not duplicates(self.broker)
        visible = set(self.broker.visible)
        for batch in self.commit_log:
            assert self.expected(batch) <= visible, f"batch {batch} lost records"

    @invariant()
    @named
    def nothing_beyond_the_current_batch_is_visible(self) -> None:
        assert all(record[0] <= self.batch for record in self.broker.visible)

    @invariant()
    @named
    def decisions_are_never_lost(self) -> None:
        if self.ledger.decided:
            ids = self.reader.checkpoint_ids()
            assert ids and ids[-1] == max(self.ledger.decided)
            assert set(self.ledger.decided) - self.ledger.confirmed <= set(ids)


SparkMachine.TestCase.settings = settings(stateful_step_count=20)  # on top of the profile
TestSparkProperties = SparkMachine.TestCase


SEEDED_BUDGET = 1000
SEEDED_BUGS = {
    # Spark's abort after a commit that failed past the decision drops the decided batch.
    "abort of a decided batch": SeededBug(
        "decided_transactions_are_never_rolled_back",
        (mock.patch.object(TwoPhaseCommit, "_decided_committables", lambda p, cid: ()),),
    ),
    # Recovery at start-up forgets the decided, unconfirmed batches.
    "recovery commits no decision": SeededBug(
        "recovery_commits_every_decision_and_leaves_nothing_open",
        (mock.patch.object(TwoPhaseCommit, "recover_decided", lambda p: ()),),
    ),
}
# Of seeds 0-7, the one that finds each bug soonest (`make power`: docs/testing.md).
SEEDS = {"abort of a decided batch": 0, "recovery commits no decision": 1}


def hunt_bug(bug: str, at_seed: int) -> tuple[str | None, int]:
    """The invariant ``bug`` breaks from ``at_seed`` within the budget, and the schedules."""
    return hunt(SparkMachine, SEEDED_BUGS[bug], at_seed, budget=SEEDED_BUDGET, steps=20)


@pytest.mark.parametrize("bug", sorted(SEEDED_BUGS))
def test_a_seeded_bug_in_the_split_form_is_found(bug: str) -> None:
    """Each bug breaks the invariant it is meant to break, by name, from a fixed seed."""
    assert_seeded_bug_found(bug, SEEDED_BUGS, SEEDS, hunt_bug)
