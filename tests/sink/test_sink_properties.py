"""Property test of the shipped Spark sink: ``ExactlyOnceStreamWriter`` with its real writer
(``ExactlyOnceWriter``), committer (``KafkaCommitter``) and decision store, driven as Spark
drives it, with its real admin (``TransactionAdmin`` down to kafka-python's clients) on a
model network of Kafka's transaction coordinators (``kafka_model.py``).

Spark is modelled after its micro-batch loop and task lifecycle: batch N's tasks run (a task
attempt may die before or after its pre-commit and be retried; a speculative copy may run
beside it; a zombie attempt may run at any later moment; a resubmitted stage numbers its
attempts from 0 again), then the driver calls ``commit(messages, N)`` and writes
``commits/N``; when commit raises, Spark calls ``abort(messages, N)`` and the query fails.
A restart builds the writer again (recovery of decided batches) and replays batch N unless
``commits/N`` exists. Time passes (transactions time out on the coordinator's clock), the
cluster may switch from transactions V1 to V2 (a rolling upgrade), and crashes and lost
answers can hit any I/O step: the store's files and every request on the model network.
Coordinators move, markers are delayed, and every deadline and backoff runs on the model clock.

The decision store is the shipped one down to its system calls: ``_LocalFileSystem`` runs on
a model of a POSIX disk (``posix_model.py``) where a crash can strike at any system call of a
write, and the driver's machine can lose power: its disk then keeps only what was fsynced.
A decision counts as durable once it would survive that (``posix_store.py``).

Invariants: no record is ever visible twice; every record of every batch in ``commits/`` is
visible; nothing is committed that no durable decision names at the instant of the commit; a
decided transaction is never aborted except by the coordinator's timeout, and then the query
stops loudly (``TransactionLostError``) and never records the batch as done.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import pickle
import sys
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any
from unittest import mock

import pyarrow as pa
import pytest
from checkpoint_faults import Fault, Faults, InjectedFailure, Ledger, SimulatedCrash
from hypothesis import HealthCheck, Phase, event, seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from kafka.admin import KafkaAdminClient
from kafka.net.compat import KafkaNetClient
from kafka_model import BROKERS, TXN_PARTITIONS, KafkaModel, ModelNetwork, ModelProducer, Step
from posix_store import PosixDisk

from checkpoint import _filesystem
from checkpoint._filesystem import _LocalFileSystem
from checkpoint.deadline import Deadline, call_with_retries
from checkpoint.errors import DeadlineExceeded, KafkaEosError
from checkpoint.model import Snapshot
from checkpoint.store import SnapshotStore
from checkpoint.testing import ManualClock
from checkpoint.two_phase_commit import TwoPhaseCommit
from connectors.kafka import coordinators, fence, transactions
from connectors.kafka.sink import owners
from connectors.kafka.sink.committer import KafkaCommitter
from connectors.kafka.sink.errors import (
    CommitUndeterminedError,
    PreCommitLostError,
    TransactionLostError,
)
from connectors.kafka.sink.naming import TransactionalIdNaming
from connectors.kafka.sink.options import SinkOptions, decision_location
from connectors.kafka.sink.writer import ExactlyOnceWriter
from connectors.kafka.txn_state import TxnDescription, TxnState
from connectors.spark import sink as spark_sink

TASKS = 3
TIMEOUT_S = 60  # transaction.timeout.ms
MARGIN_MS = 15_000  # the commit margin for it and commitTimeoutMs 5000 (lifetime.py)
OPTIONS = {
    "kafka.bootstrap.servers": "model:9092",
    "topic": "out",
    "transactionalIdPrefix": "q",
    "checkpointLocation": "/model/checkpoint",
    "kafka.transaction.timeout.ms": str(TIMEOUT_S * 1000),
    "commitTimeoutMs": "5000",
    # One record at a time: a task's second record meets a full queue, and is queued again.
    "kafka.queue.buffering.max.messages": "1",
}
# A crash at one of the next 13 steps; at a store write, inside it: before its n-th change to
# the disk (1 to 5: create, write, fsync, rename, fsync of the directory), or just after it
# (6; 0: before the write). Or a failure before or after one of the next 13 steps.
FAULT = st.tuples(st.just("crash"), st.integers(0, 12), st.integers(0, 6)) | st.tuples(
    st.just("fail"), st.integers(0, 12), st.booleans()
)
FATES = st.sampled_from(["ok", "ok", "ok", "dies-before", "dies-after", "speculative", "zombie"])


def rows(batch: int, task: int) -> int:
    """How many records task ``task`` of batch ``batch`` writes: a pure function, as a
    replay from the same offsets is; 0 for some tasks."""
    return (batch + task) % 3


class TaskKilled(BaseException):
    """kill -9 of a task's worker: nothing in the writer runs after it."""


class SparkOnModelKafka(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock(1_800_000_000.0)
        self.kafka = KafkaModel(v2=False, clock=self.clock)
        self.commits = self.kafka.committed = _Commits(self)
        self.faults = _ConcurrentFaults(self)
        self.ledger = _CheckedLedger(self)
        self.disk = PosixDisk(decision_location(OPTIONS["checkpointLocation"]), self.ledger)
        self.killed = False  # the running task's worker is being killed
        # What TaskContext says in a task: batch, task partition, attempt number, and the task
        # attempt id, unique per attempt in the application.
        self.task: tuple[int, int, int, int] = (0, 0, 0, 0)
        self.task_attempt_ids = itertools.count()
        self.batch = 0  # offsets/N: the batch being run
        self.commit_log: set[int] = set()  # commits/N
        self.messages: dict[int, Any] = {}  # finished tasks of batch N: commit messages
        self.attempts: Counter[int] = Counter()  # next attempt number per task, this stage
        self.zombies: list[tuple[int, int, int]] = []  # (batch, task, attempt) still running
        self.writer: spark_sink.ExactlyOnceStreamWriter | None = None
        self.stopped_by_loss = False
        self._patches = contextlib.ExitStack()
        self._patch()
        # The executors' admin: real, on a network without faults (the machine kills whole
        # attempts instead); the driver's is the committer's own, built on the faulty one.
        with self._admin_network(lambda where, effect: effect()):
            self.executor_admin = transactions.TransactionAdmin(
                {"bootstrap.servers": OPTIONS["kafka.bootstrap.servers"]}
            )

    def _patch(self) -> None:
        """Spark's and Kafka's ends of the shipped code, and nothing else."""
        machine, clock = self, self.clock
        patches = [
            self.disk.mounted(),
            mock.patch.object(spark_sink, "startup_checks", lambda sink: sink),
            mock.patch.object(spark_sink, "spark_query_id", lambda sink: "query-1"),
            mock.patch.object(spark_sink, "spark_plan_of", lambda sink, n: f"offsets-{n}"),
            mock.patch.object(spark_sink, "current_task", lambda: machine.task),
            mock.patch.object(spark_sink, "SnapshotStore", machine.store),
            mock.patch.object(
                spark_sink, "KafkaCommitter", functools.partial(KafkaCommitter, wall_clock=clock)
            ),
            self._admin_network(machine.faults.step),
            mock.patch.object(
                ExactlyOnceWriter, "_new_producer", lambda w, e: machine.new_producer(w, e)
            ),
            mock.patch.object(ExactlyOnceWriter, "_admin_client", lambda w: machine.executor_admin),
            mock.patch(
                "connectors.kafka.sink.writer.time", SimpleNamespace(monotonic=clock, time=clock)
            ),
            # Every deadline, backoff and throttle of the admin path on the model clock: the
            # model network's polls advance it, nothing sleeps in real time.
            mock.patch.object(Deadline.__init__, "__kwdefaults__", {"clock": clock}),
            mock.patch.object(
                call_with_retries,
                "__kwdefaults__",
                {**(call_with_retries.__kwdefaults__ or {}), "sleep": clock.advance},
            ),
            mock.patch.object(fence.fence_all, "__kwdefaults__", {"sleep": clock.advance}),
            mock.patch.object(coordinators, "time", SimpleNamespace(monotonic=clock)),
            mock.patch.object(
                owners.OwnerRegistry.__init__,
                "__kwdefaults__",
                {"wall_clock": clock, "monotonic": clock},
            ),
            mock.patch.dict(owners._registered, clear=True),  # a fresh process's throttle
        ]
        for patch in patches:
            self._patches.enter_context(patch)

    def store(self, location: str) -> SnapshotStore:
        """The decisions, on the driver's disk (a fresh handle, as in a new process)."""
        assert location == self.disk.location
        return self.disk.open_store(3, self.faults, self.ledger.check_decision)

    def new_producer(self, writer: ExactlyOnceWriter, extra: dict[str, Any]) -> ModelProducer:
        return _KillableProducer(self, writer._producer_config(extra))

    def teardown(self) -> None:
        self._patches.close()

    def _admin_network(self, step: Step) -> contextlib.AbstractContextManager[Any]:
        """``TransactionAdmin`` as shipped, on the model network: every request it sends,
        kafka-python's admin client's included, goes through ``step`` (the faults)."""

        def client(**config: Any) -> KafkaNetClient:
            network = ModelNetwork(self.kafka, step, observe=lambda what: event(what), **config)
            return KafkaNetClient(net=network, manager=network)

        stack = contextlib.ExitStack()
        stack.enter_context(mock.patch.object(transactions, "KafkaNetClient", client))
        admin = functools.partial(KafkaAdminClient, kafka_client=client)
        stack.enter_context(mock.patch.object(transactions, "KafkaAdminClient", admin))
        return stack

    # -- Kafka's side ------------------------------------------------------------------------

    @rule(
        partition=st.integers(0, TXN_PARTITIONS - 1),
        load_s=st.sampled_from([0, 1, 5]),
        after=st.integers(0, 6),
    )
    def coordinator_moves(self, partition: int, load_s: int, after: int) -> None:
        """A transaction log partition's leadership moves (a broker restarts, a reassignment),
        now or just before the ``after``-th request from now (between a lookup and its
        request): the old coordinator answers NOT_COORDINATOR, the new one loads ``load_s`` s."""
        self.kafka.move_coordinator(partition, load_s, after=after)
        event("a coordinator moved")

    @rule(seconds=st.sampled_from([1, 5, 20]))
    def markers_are_delayed(self, seconds: int) -> None:
        """A partition leader is down: transactions ending in the next ``seconds`` stay
        PrepareCommit / PrepareAbort so long, and meet requests with CONCURRENT_TRANSACTIONS."""
        self.kafka.delay_markers(seconds)

    @initialize(v2=st.booleans())
    def setup(self, v2: bool) -> None:
        self.kafka.v2 = v2
        self.start_query()

    # -- Spark's side ----------------------------------------------------------------------

    def expected(self, batch: int) -> Counter[tuple[int, int, int]]:
        return Counter((batch, t, s) for t in range(TASKS) for s in range(rows(batch, t)))

    def query_fails(self) -> None:
        self.writer = None
        self.messages = {}
        self.zombies = []  # executors go with the driver
        self.attempts = Counter()

    @precondition(lambda self: self.writer is None and not self.stopped_by_loss)
    @rule()
    def start_query(self) -> None:
        """(Re)start: Spark builds the writer (which commits decided batches first), then
        replays batch N if ``commits/N`` is missing."""
        self.disk.model.revive()  # a new driver process
        sink = SinkOptions.parse(OPTIONS)
        assert sink.exactly_once is not None
        try:
            self.writer = spark_sink.ExactlyOnceStreamWriter(sink, sink.exactly_once)
        except SimulatedCrash:
            return
        except Exception as error:
            self.failed(error)
            return
        event("query started")

    def failed(self, error: BaseException) -> None:
        """The only ways the driver may fail: a loud loss, or an injected fault it will
        recover from at the next start; anything else is a bug in the sink."""
        if isinstance(error, TransactionLostError):
            self.check_loss_is_a_timeout()
            self.stopped_by_loss = True
            event("stopped: a decided transaction timed out")
            return
        if isinstance(error, CommitUndeterminedError):
            self.check_undetermined_is_hidden(error)
            self.stopped_by_loss = True
            event("stopped: a decided transaction's outcome is no longer shown")
            return
        if isinstance(error, PreCommitLostError):
            self.check_refusal_is_the_clocks(error)
            event("refused to decide an expiring transaction")
            return
        chain: list[BaseException] = []
        cause: BaseException | None = error
        while cause is not None and cause not in chain:
            chain.append(cause)
            cause = cause.__cause__ or cause.__context__
        nested = getattr(error, "errors", ())
        # A lost answer (the model's only source of DeadlineExceeded): the next start retries.
        injected = (InjectedFailure, DeadlineExceeded)
        if any(isinstance(e, injected) for e in [*chain, *nested]):
            return
        raise AssertionError(f"the driver failed without an injected fault: {error!r}")

    def check_loss_is_a_timeout(self) -> None:
        """A decided transaction may only be lost to the coordinator's timeout."""
        lost = self.decided_keys() & self.kafka.aborted
        assert lost, "TransactionLostError, but no decided transaction was aborted"
        assert lost <= self.kafka.timed_out, f"decided, then aborted: {lost}"

    def check_undetermined_is_hidden(self, error: CommitUndeterminedError) -> None:
        """Undetermined only where the coordinator truly no longer shows the outcome: the
        decided transaction ended (committed, or timed out) and its id moved on to a later
        producer epoch. A decided transaction aborted by anything but its timeout is a bug."""
        [decided] = {
            c for s in self.ledger.decided.values() for c in s.committables
            if c.key == (error.transactional_id, error.producer_id, error.epoch)
        }  # fmt: skip
        ended = decided.key in self.kafka.committed or decided.key in self.kafka.timed_out
        now = self.kafka.describe(decided.transactional_id)
        assert ended, f"{decided.key} undetermined, but it neither committed nor timed out"
        assert now is not None and now.start_time_ms != decided.start_time_ms, (
            f"{decided.key} undetermined, but its coordinator still shows it: {now}"
        )

    def check_refusal_is_the_clocks(self, error: PreCommitLostError) -> None:
        """Only the clock may make the driver refuse a pre-commit: the transaction timed out,
        or has less than the commit margin left. Anything else (a sweep that aborted what the
        batch names, a fence) is a bug that would stall the query forever."""
        [committable] = [
            m.committable for m in self.messages.values()
            if m.committable.transactional_id == error.transactional_id
        ]  # fmt: skip
        now = self.kafka.describe(error.transactional_id)
        assert now is not None
        expiring = (
            now.state == TxnState.ONGOING
            and now.start_time_ms + now.timeout_ms - self.kafka.now_ms() < MARGIN_MS
        )
        assert committable.key in self.kafka.timed_out or expiring, (
            f"pre-commit of {committable.key} refused, but it neither timed out nor expires: {now}"
        )

    def decided_keys(self) -> set[tuple[str, int, int]]:
        return {c.key for s in self.ledger.decided.values() for c in s.committables}

    def run_attempt(self, batch: int, task: int, attempt: int, *, dies: str | None) -> Any:
        """One task attempt on an executor, with the writer pickled to it as Spark does."""
        assert self.writer is not None
        writer = pickle.loads(pickle.dumps(self.writer))
        self.task = (batch, task, attempt, next(self.task_attempt_ids))
        values = [json.dumps([batch, task, s]) for s in range(rows(batch, task))]

        def batches() -> Iterator[pa.RecordBatch]:
            yield pa.RecordBatch.from_pydict({"value": values})
            if dies == "before":
                self.killed = True
                raise TaskKilled

        try:
            return writer.write(batches())
        except TaskKilled:
            return None
        except KafkaEosError as error:  # the attempt fails; Spark retries the task
            event(f"task failed: {type(error).__name__}")
            return None
        finally:
            self.killed = False

    @precondition(lambda self: self.writer is not None)
    @rule(
        fates=st.lists(FATES, min_size=TASKS, max_size=TASKS),
        pause=st.sampled_from([0, 0, 0, 20, 50]),
        fault=st.none() | FAULT,
    )
    def run_batch(self, fates: list[str], pause: int, fault: Fault | None) -> None:
        """A whole micro-batch: every task (an attempt that did not finish is retried once),
        then, ``pause`` seconds later (a slow stage, a GC pause), the driver's commit."""
        for task, fate in enumerate(fates):
            self.run_task(task, fate)
            self.run_task(task, "ok")
        self.clock.advance(pause)
        if len(self.messages) == TASKS:
            self.commit_batch(fault)

    @precondition(lambda self: self.writer is not None)
    @rule(task=st.integers(0, 2), fate=FATES)
    def run_task(self, task: int, fate: str) -> None:
        """One task of batch N, with what happens to its attempt(s)."""
        task %= TASKS
        if self.writer is None or task in self.messages:
            return
        attempt = self.attempts[task]
        self.attempts[task] += 1
        if fate == "zombie":  # runs later, after its task was given up on
            self.zombies.append((self.batch, task, attempt))
            return
        message = self.run_attempt(
            self.batch, task, attempt, dies="before" if fate == "dies-before" else None
        )
        if fate == "speculative":
            copy = self.attempts[task]
            self.attempts[task] += 1
            self.run_attempt(self.batch, task, copy, dies=None)  # the loser: its result dropped
        if message is not None and fate != "dies-after":
            self.messages[task] = message

    @precondition(lambda self: self.writer is not None and bool(self.zombies))
    @rule(data=st.data())
    def zombie_runs(self, data: st.DataObject) -> None:
        """An attempt Spark gave up on runs now, whatever the driver did meanwhile."""
        batch, task, attempt = self.zombies.pop(data.draw(st.integers(0, len(self.zombies) - 1)))
        self.run_attempt(batch, task, attempt, dies=None)
        event("a zombie attempt ran")

    @precondition(lambda self: self.writer is not None)
    @rule()
    def stage_resubmitted(self) -> None:
        """A FetchFailed resubmits the stage: attempt numbers start at 0 again, while the old
        stage's attempts may still run."""
        self.attempts = Counter()

    @precondition(lambda self: self.writer is not None and len(self.messages) == TASKS)
    @rule(fault=st.none() | FAULT)
    def commit_batch(self, fault: Fault | None) -> None:
        """Driver: ``commit(messages, N)``, then Spark writes ``commits/N``."""
        if self.writer is None or len(self.messages) != TASKS:
            return
        if fault is not None:
            self.faults.arm(fault)
        batch = self.batch
        messages = list(self.messages.values())
        try:
            self.writer.commit(messages, batch)
            self.faults.step(f"write commits/{batch}", lambda: self.commit_log.add(batch))
        except SimulatedCrash as crash:
            event(f"crash {crash.where}")
            self.query_fails()
            return
        except Exception as error:
            self.failed(error)
            self.abort_batch(messages)
            return
        event("batch committed")
        assert self.expected(batch) <= Counter(self.kafka.visible), "committed but not visible"
        self.batch += 1
        self.messages = {}
        self.attempts = Counter()

    @precondition(lambda self: self.writer is not None and bool(self.messages))
    @rule()
    def job_fails(self) -> None:
        """A task failed for good: Spark aborts the batch with the messages it has."""
        self.abort_batch(list(self.messages.values()))

    def abort_batch(self, messages: list[Any]) -> None:
        assert self.writer is not None
        with contextlib.suppress(SimulatedCrash, InjectedFailure, KafkaEosError):
            self.writer.abort(messages, self.batch)
        self.query_fails()

    @precondition(lambda self: self.writer is not None)
    @rule()
    def driver_crash(self) -> None:
        self.query_fails()

    @rule(keep=st.sampled_from([0, 0, 1, 2]))
    def power_loss(self, keep: int) -> None:
        """The driver's machine loses power, whatever it was doing (a crash may have stopped
        it in a write already): its disk keeps what was durable, and perhaps the ``keep``
        oldest directory operations since. Kafka and Spark's own logs are elsewhere."""
        self.query_fails()
        self.disk.model.power_loss(keep)
        event("power loss")

    @rule(seconds=st.sampled_from([1, 5, 20, 50]))
    def time_passes(self, seconds: int) -> None:
        self.clock.advance(seconds)

    @precondition(lambda self: self.writer is None)
    @rule()
    def long_outage(self) -> None:
        """The query stays down longer than the transaction timeout."""
        self.clock.advance(TIMEOUT_S + 10)

    @rule(steps=st.integers(0, 12))
    def zombie_runs_during_the_next_commit(self, steps: int) -> None:
        """An executor runs a zombie attempt while the driver commits: at its ``steps``-th
        request or file operation from now (between verify and EndTxn, say)."""
        self.faults.interleave_in = steps

    @precondition(lambda self: not self.kafka.v2)
    @rule(broker=st.sampled_from(BROKERS))
    def rolling_upgrade_to_v2(self, broker: int) -> None:
        """One step: the 3.9 broker restarts on 4.1, or transaction.version 2 reaches one."""
        event(self.kafka.upgrade_next_broker(broker).split(" broker")[0])
        if self.kafka.v2:
            event("cluster upgraded to transactions V2")

    @rule(fault=FAULT)
    def arm_fault(self, fault: Fault) -> None:
        self.faults.arm(fault)

    @rule()
    def the_next_end_txn_answer_is_lost(self) -> None:
        """The commit takes effect, the driver never hears it: the next start re-drives it,
        and the coordinator's answer, or a describe, must tell that it is committed."""
        self.faults.lose_answer_at = "commit "

    @rule()
    def driver_dies_at_the_next_end_txn(self) -> None:
        """The classic worst moment: the decision is durable, no transaction is committed."""
        self.faults.crash_at = "commit "

    @rule()
    def driver_dies_between_the_next_rename_and_its_directory_fsync(self) -> None:
        """The durability window: the next decision or confirmation written is renamed into
        place, every process sees it, and a power loss can still undo it."""
        self.faults.crash_inside = 5  # before the fifth change: the directory's fsync

    # -- invariants ------------------------------------------------------------------------

    @invariant()
    def no_record_is_visible_twice(self) -> None:
        twice = [r for r, n in Counter(self.kafka.visible).items() if n > 1]
        assert not twice, f"duplicates: {twice}"

    @invariant()
    def every_batch_spark_recorded_is_visible(self) -> None:
        visible = Counter(self.kafka.visible)
        for batch in self.commit_log:
            assert self.expected(batch) <= visible, f"batch {batch} lost records"

    @invariant()
    def nothing_is_committed_that_no_durable_decision_names(self) -> None:
        """Checked at the instant of each commit (``_Commits``): a decision that became
        durable only later, or that a power loss took back, does not count."""
        assert not self.commits.undecided, self.commits.undecided
        assert self.kafka.committed <= self.decided_keys()

    @invariant()
    def decided_transactions_are_aborted_only_by_their_timeout(self) -> None:
        """The sink never aborts, fences or lets another attempt fence a decided
        transaction; only the coordinator's clock may end one, and then the batch is never
        recorded as done (checked above) and the query stops loudly."""
        aborted = self.decided_keys() & self.kafka.aborted
        assert aborted <= self.kafka.timed_out, f"decided, then aborted: {aborted}"

    @invariant()
    def a_running_query_has_no_unconfirmed_decision(self) -> None:
        """Recovery commits every decided batch when the writer is built, before any task
        runs: a started query never carries an unconfirmed decision into its batches."""
        if self.writer is not None:
            assert set(self.ledger.decided) <= self.ledger.confirmed, "started unrecovered"

    @invariant()
    def nothing_beyond_the_current_batch_is_visible(self) -> None:
        assert all(record[0] <= self.batch for record in self.kafka.visible)


class _ConcurrentFaults(Faults):
    """The driver's steps, with executors running beside it: an armed interleaving runs the
    oldest zombie attempt just before the driver's step."""

    def __init__(self, machine: SparkOnModelKafka) -> None:
        super().__init__()
        self._machine = machine
        self.interleave_in: int | None = None
        self.crash_at: str | None = None  # the next step whose name starts so crashes
        self.lose_answer_at: str | None = None  # ... takes effect, and its answer is lost
        self.crash_inside: int | None = None  # the next store write crashes so (FAULT's tear)

    def step(self, where: str, effect: Any, torn: Any = None) -> Any:
        try:
            return self._step(where, effect, torn)
        except SimulatedCrash:
            self._machine.disk.model.crash()  # the dead driver writes nothing more
            raise

    def _step(self, where: str, effect: Any, torn: Any) -> Any:
        if self.crash_at is not None and where.startswith(self.crash_at):
            self.crash_at = None
            raise SimulatedCrash(where)
        if self.crash_inside is not None and torn is not None:
            self.tear, self.crash_inside = self.crash_inside, None
            torn()
            raise SimulatedCrash(where)
        if self.lose_answer_at is not None and where.startswith(self.lose_answer_at):
            self.lose_answer_at = None
            effect()
            raise InjectedFailure(f"answer lost after {where}")
        machine = self._machine
        if self._due("interleave_in") and machine.zombies and machine.writer is not None:
            batch, task, attempt = machine.zombies.pop(0)
            machine.run_attempt(batch, task, attempt, dies=None)
            event("a zombie attempt ran during a commit")
        return super().step(where, effect, torn)


class _CheckedLedger(Ledger):
    """The ledger hears of a decision when it becomes durable (``posix_store``); each is also
    checked at the instant its write starts: verify must be the last step before it, so every
    transaction it names is open, as its task left it, with the commit margin (15 s) of its
    timeout left."""

    def __init__(self, machine: SparkOnModelKafka) -> None:
        super().__init__()
        self._machine = machine

    def check_decision(self, name: str, data: bytes) -> None:
        if not name.endswith(".snapshot.json"):
            return
        record = json.loads(data)
        record.pop("sha256")
        decision = Snapshot.from_dict(record)
        kafka = self._machine.kafka
        for c in decision.committables:
            now = kafka.describe(c.transactional_id)
            assert now is not None and (now.state, now.producer_id, now.epoch) == (
                TxnState.ONGOING, c.producer_id, c.epoch,
            ), f"batch {decision.checkpoint_id} decided {c.key}, which is {now}"  # fmt: skip
            left_ms = now.start_time_ms + now.timeout_ms - kafka.now_ms()
            assert left_ms >= MARGIN_MS, (
                f"batch {decision.checkpoint_id} decided {c.key} with {left_ms} ms left"
            )


class _Commits(set[tuple[str, int, int]]):
    """The coordinators' committed transactions; notes each one that no durable decision
    named at the instant it committed."""

    def __init__(self, machine: SparkOnModelKafka) -> None:
        super().__init__()
        self._machine = machine
        self.undecided: list[str] = []

    def add(self, key: tuple[str, int, int]) -> None:
        if key not in self._machine.decided_keys():
            durable = sorted(self._machine.disk.model.durable_files(self._machine.disk.location))
            self.undecided.append(f"{key} committed; no durable decision names it: {durable}")
        super().add(key)


class _KillableProducer(ModelProducer):
    """A killed worker's producer does nothing more: its abort never reaches the broker."""

    def __init__(self, machine: SparkOnModelKafka, config: dict[str, Any]) -> None:
        super().__init__(machine.kafka, config)
        self._machine = machine

    def abort_transaction(self, timeout: float = 0) -> None:
        if not self._machine.killed:
            super().abort_transaction(timeout)


# 1,000 schedules in the ci profile (~30 s on a busy machine); the seeded bugs below are
# each found within 1,000.
SparkOnModelKafka.TestCase.settings = settings(
    settings.default, stateful_step_count=25, max_examples=min(settings.default.max_examples, 1000)
)
TestShippedSinkProperties = SparkOnModelKafka.TestCase


def _no_describe_before_init(writer: ExactlyOnceWriter, topic: str) -> tuple[Any, str]:
    tid = writer._candidates[0]
    producer = writer._new_producer({"transactional.id": tid, "stats_cb": writer._stats})
    return producer, tid


_shipped_sweep = KafkaCommitter.abort_lingering


def _sweep_everything(committer: KafkaCommitter, keep: Any) -> None:
    _shipped_sweep(committer, ())


def _exactly_one_epoch(
    d: TxnDescription, producer_id: int, epoch: int, *, bump_possible: bool
) -> bool:
    """The oracle before the rolling-upgrade fix: a V2 coordinator's answer needs E + 1."""
    expected = epoch + 1 if bump_possible else epoch
    return d.state == TxnState.COMPLETE_COMMIT and (d.producer_id, d.epoch) == (
        producer_id,
        expected,
    )


def _write_atomic_without(fsync: str) -> Callable[[_LocalFileSystem, str, bytes], None]:
    """``_LocalFileSystem.write_atomic`` as shipped, less the fsync of the temporary
    ("file") or of the directory after the rename ("directory")."""

    def write_atomic(fs: _LocalFileSystem, path: str, data: bytes) -> None:
        disk_os, disk_open = _filesystem.os, _filesystem.open  # type: ignore[attr-defined]
        fs._ensure_root()
        directory, name = disk_os.path.split(path)
        temp = disk_os.path.join(directory, f".{name}.tmp-{uuid.uuid4().hex}")
        with disk_open(temp, "xb") as file:
            file.write(data)
            file.flush()
            if fsync != "file":
                disk_os.fsync(file.fileno())
        disk_os.replace(temp, path)
        if fsync != "directory":
            _filesystem._fsync_directory(directory)

    return write_atomic


SEEDED_BUDGET = 1000
SEEDED_BUGS = {
    # Every attempt of a task on one id, taken without looking: a speculative copy or a
    # zombie fences the transaction the driver verified or decided (issue 11, finding 1).
    "id reuse without fencing guard": [
        mock.patch.object(
            TransactionalIdNaming, "slots", lambda n, p, a, t: [n.transactional_id(p, 0)]
        ),
        mock.patch.object(ExactlyOnceWriter, "_producer_on_a_free_id", _no_describe_before_init),
    ],
    # Deciding what nobody checked: an expired or fenced transaction is decided.
    "decide without verify": [mock.patch.object(KafkaCommitter, "verify", lambda c, n, cs: None)],
    # Spark's abort after a commit that failed past the decision drops the decided batch.
    "abort of a decided batch": [
        mock.patch.object(TwoPhaseCommit, "_decided_committables", lambda p, cid: ())
    ],
    # The oracle before the rolling-upgrade fix: V2 coordinators accept only E + 1.
    "commit oracle blind to a V1 commit at a V2 coordinator": [
        mock.patch.object(TxnDescription, "is_commit_of", _exactly_one_epoch)
    ],
    # No commit recognised: a re-driven commit after a crash reports a false loss.
    "commit oracle that never recognises a commit": [
        mock.patch.object(TxnDescription, "is_commit_of", lambda *a, **k: False)
    ],
    # Recovery skipped at start-up: a decided batch waits for its replay, and may time out.
    "no recovery before the tasks": [
        mock.patch.object(TwoPhaseCommit, "recover_decided", lambda p: None)
    ],
    # The sweep aborts what the batch itself names: every batch is refused, forever.
    "sweep aborts the batch's own transactions": [
        mock.patch.object(KafkaCommitter, "abort_lingering", _sweep_everything)
    ],
    # The decision renamed into place before its bytes are on disk: after a power loss the
    # name may stand with no content (delayed allocation, as in ext4 and XFS).
    "rename without fsync of the temporary's data": [
        mock.patch.object(_LocalFileSystem, "write_atomic", _write_atomic_without("file"))
    ],
    # A rename is durable only once its directory is fsynced (fsync(2)): a power loss undoes it.
    "no directory fsync after the rename": [
        mock.patch.object(_LocalFileSystem, "write_atomic", _write_atomic_without("directory"))
    ],
    # A new process acts on what it lists without fsyncing the directory first: a decision
    # its dead predecessor renamed but never made durable is committed, then a power loss
    # takes the decision back and Spark replays the batch (the bug this machine found).
    "a new process trusts a rename that is not durable": [
        mock.patch.object(_LocalFileSystem, "_settle", lambda fs, directory: None)
    ],
}


# The seed of each search: of seeds 0-7, the one that finds the bug soonest (the widest margin
# under the budget, and a short CI run), searched with the local constants removed
# (_no_local_constants), so a seed no longer depends on which modules are imported. Explicit,
# because derandomize=True seeds from a digest of the machine's source, so any edit of the
# class reshuffled every search. Searched again when the admin moved onto the model network
# (kafka_model.ModelNetwork): a seed that still found its bug was kept; the others were
# re-picked: the oracle that never recognises a commit is now found by 3 seeds of 0-7 (0 after
# 725 schedules, 3, 7 after 376); the abort of a decided batch, which needs a commit that
# fails before its EndTxn takes effect (a broken connection is now retried instead), breaks
# its invariant ("decided, then aborted") from seed 0 (972 schedules) of 0-7 and seed 8 (708)
# of 8-14 (11 and 12 find it as a false "undetermined"); the oracle blind to a V1 commit, by
# seeds 0-3 and 5 (1 after 249). Changed rules draw other schedules from the same seed:
# search again then.
SEEDS = {
    "a new process trusts a rename that is not durable": 5,
    "abort of a decided batch": 8,
    "commit oracle blind to a V1 commit at a V2 coordinator": 1,
    "commit oracle that never recognises a commit": 7,
    "decide without verify": 0,
    "id reuse without fencing guard": 5,
    "no directory fsync after the rename": 3,
    "no recovery before the tasks": 5,
    "rename without fsync of the temporary's data": 4,
    "sweep aborts the batch's own transactions": 1,
}


@contextlib.contextmanager
def _no_local_constants() -> Iterator[None]:
    """Hypothesis (pinned in pyproject.toml) sometimes draws numbers and strings found in the
    project's imported modules ("local constants"): a fixed seed then gave other schedules
    whenever another module was imported, or tests were collected together. Without them a
    seed's schedules depend on the seed, the machine and the pinned Hypothesis only."""
    from hypothesis.internal.conjecture import providers
    from hypothesis.internal.constants_ast import Constants

    providers.CONSTANTS_CACHE.cache.clear()
    with mock.patch.object(providers, "_get_local_constants", Constants):
        yield
    providers.CONSTANTS_CACHE.cache.clear()


@pytest.mark.parametrize("bug", sorted(SEEDED_BUGS))
def test_a_seeded_bug_in_the_shipped_sink_is_found(bug: str) -> None:
    """The machine's power, checked: each bug breaks an invariant within a fixed budget."""

    def machine() -> SparkOnModelKafka:
        return SparkOnModelKafka()

    with contextlib.ExitStack() as stack:
        stack.enter_context(_no_local_constants())
        for patch in SEEDED_BUGS[bug]:
            stack.enter_context(patch)
        with pytest.raises(AssertionError):
            run_state_machine_as_test(
                seed(SEEDS[bug])(machine),
                settings=settings(
                    max_examples=SEEDED_BUDGET,
                    stateful_step_count=25,
                    database=None,
                    deadline=None,
                    suppress_health_check=list(HealthCheck),
                    report_multiple_bugs=False,
                    phases=[Phase.generate],
                ),
            )


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="known stop (docs/sink.md, 'A late attempt after the commit'): the coordinator no "
    "longer shows whether a re-initialized id's transaction committed, so the sink stops with "
    "CommitUndeterminedError (never calls it lost); telling needs the partitions' offsets",
)
@pytest.mark.parametrize("v2", [False, True], ids=["V1", "V2"])
def test_a_zombie_that_takes_a_committed_id_before_the_confirmation_is_no_loss(v2: bool) -> None:
    """A zombie of batch 0 from before a stage resubmission (attempt 0, starting at the slot
    of the new attempt 0: their task attempt ids meet there one time in 32) opens its
    transaction after the driver's EndTxn(commit) of that id and before the confirmation; the
    driver dies there. The restart's re-driven commit is fenced and the describe shows the id
    initialized again: the batch's records are visible, and the sink stops with the outcome
    undetermined. Found by a red-team review; the machine finds it only when directed."""
    machine = SparkOnModelKafka()
    quiet = mock.patch.object(sys.modules[__name__], "event", lambda *_: None)  # no hypothesis
    try:
        quiet.start()
        machine.task_attempt_ids = itertools.repeat(0)  # every attempt starts at its number
        machine.setup(v2=v2)
        machine.run_task(1, "zombie")
        machine.stage_resubmitted()
        for task in range(TASKS):
            machine.run_task(task, "ok")
        shipped_step = machine.faults.step

        def zombie_then_crash(where: str, effect: Any, torn: Any = None) -> Any:
            if where == "write 0.confirmed.json" and machine.zombies:
                machine.run_attempt(*machine.zombies.pop(0), dies=None)
                raise SimulatedCrash(where)
            return shipped_step(where, effect, torn)

        machine.faults.step = zombie_then_crash  # type: ignore[method-assign]
        machine.commit_batch(None)
        machine.faults.step = shipped_step  # type: ignore[method-assign]
        assert machine.expected(0) <= Counter(machine.kafka.visible)  # committed
        machine.start_query()  # the machine checks that an undetermined outcome is hidden
        assert not machine.stopped_by_loss
    finally:
        quiet.stop()
        machine.teardown()
