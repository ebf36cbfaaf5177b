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
stops loudly (``TransactionLostError``) and never records the batch as done. The driver fails
only with a fault injected during the call, or a type that fault, or a model condition met
during the call (a coordinator loading, markers not yet written), may surface as
(``SURFACES``). Progress: once faults stop and the model's conditions end, the next batch
commits within ``RESTARTS_TO_COMMIT`` restarts, unless the query stops on a loss the rules
allow.
Each invariant fails as ``InvariantViolated`` under its own name; one checked inside the sink
is recorded there and failed after the step, so no ``except`` in the sink can swallow it.
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
from typing import Any, NamedTuple
from unittest import mock

import pyarrow as pa
import pytest
from checkpoint_faults import (
    Fault,
    Faults,
    InjectedFailure,
    InvariantViolated,
    Ledger,
    SeededBug,
    SimulatedCrash,
    assert_seeded_bug_found,
    hunt,
    misfits,
    named,
)
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from kafka.admin import KafkaAdminClient
from kafka.net.compat import KafkaNetClient
from kafka_model import BROKERS, TXN_PARTITIONS, KafkaModel, ModelNetwork, ModelProducer, Step
from posix_store import PosixDisk

from checkpoint import _filesystem
from checkpoint._filesystem import _LocalFileSystem
from checkpoint.deadline import Deadline, call_with_retries
from checkpoint.errors import CheckpointCommitFailed, DeadlineExceeded, KafkaEosError
from checkpoint.model import Snapshot
from checkpoint.store import SnapshotStore
from checkpoint.testing import ManualClock
from checkpoint.two_phase_commit import TwoPhaseCommit
from connectors.kafka import fence, transactions, txn_coordinators
from connectors.kafka.sink import commit_path, marker_repair, owners
from connectors.kafka.sink.committer import KafkaCommitter
from connectors.kafka.sink.errors import (
    AbortMarkerSkippedError,
    CommitMarkerSkippedError,
    CommitUndeterminedError,
    PreCommitLostError,
    TransactionLostError,
)
from connectors.kafka.sink.exactly_once_writer import ExactlyOnceWriter
from connectors.kafka.sink.naming import TransactionalIdNaming
from connectors.kafka.sink.options import SinkOptions, decision_location
from connectors.kafka.sink.writer import DeliveryFailed
from connectors.kafka.txn_state import TxnDescription, TxnState
from connectors.spark import sink as spark_sink

TASKS = 3
WRITTEN_PARTITIONS = 2  # of the output topic: a task's records go to partitions 0 and 1
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


class BrokenConnection(Exception):
    """Injected: a request's connection broke before it went out (ModelNetwork)."""


class LostAnswer(Exception):
    """Injected: a request took effect and its answer was lost; it times out."""


class CoordinatorLoading(Exception):
    """Not a fault: a request met COORDINATOR_LOAD_IN_PROGRESS (a moved coordinator loads)."""


class MarkersPending(Exception):
    """Not a fault: a request met CONCURRENT_TRANSACTIONS (markers not yet written)."""


# What each injected fault, or model condition met, may surface as out of the sink besides
# itself: each makes the admin retry until commitTimeoutMs runs out (a 5 s load equals it; a
# fence waits for delayed markers), which it raises as DeadlineExceeded (the decision stands;
# the next start re-drives it). Nothing else is excused.
# The settling of markers before a batch's tasks waits for the same conditions, and raises
# CommitMarkerSkippedError once they outlast it, but only as a wait (``waits``).
SURFACES: dict[type[Exception], tuple[type[Exception], ...]] = {
    BrokenConnection: (DeadlineExceeded, CommitMarkerSkippedError, AbortMarkerSkippedError),
    LostAnswer: (DeadlineExceeded, CommitMarkerSkippedError, AbortMarkerSkippedError),
    CoordinatorLoading: (DeadlineExceeded, CommitMarkerSkippedError, AbortMarkerSkippedError),
    MarkersPending: (DeadlineExceeded, CommitMarkerSkippedError, AbortMarkerSkippedError),
}
# The answers that record a model condition (on the driver's network).
CONDITIONS = {
    "CoordinatorLoadInProgressError": CoordinatorLoading,
    "ConcurrentTransactionsError": MarkersPending,
}
# The progress rule's bound: restarts (each a recovery and a replay of batch N) until the next
# batch commits. The first may meet a decided transaction of the faulty past, or refuse a
# pre-commit the clock expired; the second must commit.
RESTARTS_TO_COMMIT = 2
# What the driver may raise with no fault injected: a decided transaction lost to its timeout,
# an outcome the coordinator no longer shows (each stops the query), a pre-commit refused
# because its transaction expires (the replay opens new ones). failed() checks each.
UNFORCED_FAILURES = (TransactionLostError, CommitUndeterminedError, PreCommitLostError)
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
        # What TaskContext says in a task: batch, task partition, attempt number, and the task
        # attempt id, unique per attempt in the application (a restart numbers from 0 again).
        self.task: tuple[int, int, int, int] = (0, 0, 0, 0)
        self.task_attempt_ids = itertools.count()
        self.batch = 0  # offsets/N: the batch being run
        self.commit_log: set[int] = set()  # commits/N
        self.messages: dict[int, Any] = {}  # finished tasks of batch N: commit messages
        self.attempts: Counter[int] = Counter()  # next attempt number per task, this stage
        self.zombies: list[_Zombie] = []  # attempts still running that Spark gave up on
        self.writer: spark_sink.ExactlyOnceStreamWriter | None = None
        self.stopped_by_loss = False
        # The faults injected, and model conditions met, during the running driver call:
        # what may excuse its error (SURFACES).
        self.injected: list[Exception] = []
        # Violations noticed inside the sink (a broad except there must not swallow them).
        self.violations: list[InvariantViolated] = []
        self._patches = contextlib.ExitStack()
        self._patch()
        # The executors' admin: real, on a network without faults (the machine kills whole
        # attempts instead); the driver's is the committer's own, built on the faulty one.
        with self._admin_network(lambda where, effect: effect(), lambda what: event(what)):
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
            mock.patch.object(commit_path, "SnapshotStore", machine.store),
            mock.patch.object(
                commit_path, "KafkaCommitter", functools.partial(KafkaCommitter, wall_clock=clock)
            ),
            self._admin_network(machine._request_step, machine._observe_request),
            mock.patch.object(
                ExactlyOnceWriter, "_new_producer", lambda w, e: machine.new_producer(w, e)
            ),
            mock.patch.object(ExactlyOnceWriter, "_admin_client", lambda w: machine.executor_admin),
            mock.patch(
                "connectors.kafka.sink.exactly_once_writer.time",
                SimpleNamespace(monotonic=clock, time=clock),
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
            mock.patch.object(txn_coordinators, "time", SimpleNamespace(monotonic=clock)),
            mock.patch.object(
                owners.OwnerRegistry.__init__,
                "__kwdefaults__",
                {"wall_clock": clock, "monotonic": clock},
            ),
            mock.patch.dict(owners._registered, clear=True),  # a fresh process's throttle
            mock.patch.object(marker_repair, "time", SimpleNamespace(sleep=clock.advance)),
            mock.patch.object(commit_path, "_SETTLED", set()),
        ]
        for patch in patches:
            self._patches.enter_context(patch)

    def store(self, location: str) -> SnapshotStore:
        """The decisions, on the driver's disk (a fresh handle, as in a new process)."""
        assert location == self.disk.location
        return self.disk.open_store(3, self.faults, self.ledger.check_decision)

    def new_producer(self, writer: ExactlyOnceWriter, extra: dict[str, Any]) -> ModelProducer:
        return ModelProducer(self.kafka, writer._producer_config(extra))

    def teardown(self) -> None:
        self._patches.close()

    def _admin_network(
        self, step: Step, observe: Callable[[str], None]
    ) -> contextlib.AbstractContextManager[Any]:
        """``TransactionAdmin`` as shipped, on the model network: every request it sends,
        kafka-python's admin client's included, goes through ``step`` (the faults)."""

        def client(**config: Any) -> KafkaNetClient:
            network = ModelNetwork(self.kafka, step, observe=observe, **config)
            return KafkaNetClient(net=network, manager=network)

        stack = contextlib.ExitStack()
        stack.enter_context(mock.patch.object(transactions, "KafkaNetClient", client))
        admin = functools.partial(KafkaAdminClient, kafka_client=client)
        stack.enter_context(mock.patch.object(transactions, "KafkaAdminClient", admin))
        return stack

    def _request_step(self, where: str, effect: Any) -> Any:
        """A driver request through the faults. ModelNetwork turns an injected failure before
        the effect into a broken connection, after it into a lost answer: recorded as such, so
        that only what each may surface as is excused."""
        taken: list[bool] = []

        def counted() -> Any:
            taken.append(True)
            return effect()

        try:
            return self.faults.step(where, counted)
        except InjectedFailure:
            self.injected.append((LostAnswer if taken else BrokenConnection)(where))
            raise

    def _observe_request(self, what: str) -> None:
        """The driver network's events; an answer that makes the admin wait is recorded."""
        event(what)
        for answer, condition in CONDITIONS.items():
            if what.endswith(f"answered {answer}"):
                self.injected.append(condition(what))

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

    @rule(partition=st.integers(0, WRITTEN_PARTITIONS - 1), seconds=st.sampled_from([1, 20, 90]))
    def a_partition_leader_goes_offline(self, partition: int, seconds: int) -> None:
        """An output partition's leader is offline as markers are written: a V2
        coordinator skips its marker there (KAFKA-20734), which the sink must write before
        any later transaction of the producer can join the range; 90 s outlasts a
        transaction's timeout."""
        self.kafka.take_offline((OPTIONS["topic"], partition), seconds)

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
        error = self.start()
        if error is not None:
            self.failed(error)

    def start(self) -> Exception | None:
        """A new driver builds the writer; the error that stopped it, if any."""
        self.disk.model.revive()  # a new driver process
        commit_path._SETTLED.clear()  # which has settled no decision yet
        self.task_attempt_ids = itertools.count()  # a new SparkContext numbers them from 0
        return self.build_writer()

    def build_writer(self) -> Exception | None:
        """Spark builds the writer of the batch it plans; the error that stopped it, if any."""
        sink = SinkOptions.parse(OPTIONS)
        assert sink.exactly_once is not None
        self.injected = []
        self.writer = None
        try:
            self.writer = spark_sink.ExactlyOnceStreamWriter(sink, sink.exactly_once)
        except SimulatedCrash:
            self.query_fails()
            return None
        except Exception as error:
            return error
        event("writer built")
        return None

    def failed(self, error: BaseException) -> None:
        """The only ways the driver may fail: a loud loss, or an injected fault it will
        recover from at the next start; anything else is a bug in the sink."""
        if isinstance(error, TransactionLostError):
            self.a_loss_is_a_timeout()
            self.stopped_by_loss = True
            event("stopped: a decided transaction timed out")
            return
        if isinstance(error, CommitUndeterminedError):
            self.an_undetermined_outcome_is_hidden(error)
            self.stopped_by_loss = True
            event("stopped: a decided transaction's outcome is no longer shown")
            return
        if isinstance(error, PreCommitLostError):
            self.only_the_clock_refuses_a_pre_commit(error)
            event("refused to decide an expiring transaction")
            return
        self.the_driver_fails_only_from_injected_faults(error)

    @named
    def the_driver_fails_only_from_injected_faults(self, error: BaseException) -> None:
        """An error out of the sink is excused only if it is a fault injected during this
        call, or of a type that fault surfaces as (``SURFACES``); a commit's failure only if
        each of its commits' errors is. An error merely caused by an injected one is not: it
        may be a bug in the code that handled it."""
        assert self.excused(error), (
            f"the driver failed with {error!r}; injected during the call: {self.injected!r}"
        )

    def excused(self, error: BaseException) -> bool:
        if any(error is injected for injected in self.injected):
            return True
        if type(error) is CheckpointCommitFailed and error.errors:
            return all(self.excused(e) for e in error.errors)
        if isinstance(error, (CommitMarkerSkippedError, AbortMarkerSkippedError)):
            # Waiting for markers that the model delays (a partition leader down) past the
            # deadline is what the sink must do, whatever the last look met: for the
            # transaction the error names, or any when a look failed before naming one. The
            # brokers contradicting a confirmed decision or an abort is never a fault's doing.
            if not error.waits:
                return False
            if self.kafka.markers_pending(error.transactional_id):
                return True
        return any(type(error) in SURFACES.get(type(i), ()) for i in self.injected)

    @named
    def a_loss_is_a_timeout(self) -> None:
        """A decided transaction may only be lost to the coordinator's timeout."""
        lost = self.decided_keys() & self.kafka.aborted
        assert lost, "TransactionLostError, but no decided transaction was aborted"
        assert lost <= self.kafka.timed_out, f"decided, then aborted: {lost}"

    @named
    def an_undetermined_outcome_is_hidden(self, error: CommitUndeterminedError) -> None:
        """Undetermined only where the coordinator truly no longer shows the outcome: the
        decided transaction ended (committed, or timed out) and its id moved on to a later
        producer epoch, or shows none (Empty: an init or a fence after it ended keeps the
        start time). A decided transaction aborted by anything but its timeout is a bug."""
        [decided] = {
            c for s in self.ledger.decided.values() for c in s.committables
            if c.key == (error.transactional_id, error.producer_id, error.epoch)
        }  # fmt: skip
        ended = decided.key in self.kafka.committed or decided.key in self.kafka.timed_out
        now = self.kafka.describe(decided.transactional_id)
        assert ended, f"{decided.key} undetermined, but it neither committed nor timed out"
        assert now is not None and (
            now.start_time_ms != decided.start_time_ms or now.state is TxnState.EMPTY
        ), f"{decided.key} undetermined, but its coordinator still shows it: {now}"

    @named
    def only_the_clock_refuses_a_pre_commit(self, error: PreCommitLostError) -> None:
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

    def run_attempt(
        self, batch: int, task: int, attempt: int, *, dies: str | None, shipped: bytes | None = None
    ) -> Any:
        """One task attempt on an executor, with the writer pickled to it as Spark does: the
        current batch's, or the one ``shipped`` to a zombie with its own batch."""
        if shipped is None:
            assert self.writer is not None
            shipped = pickle.dumps(self.writer)
        writer = pickle.loads(shipped)
        self.task = (batch, task, attempt, next(self.task_attempt_ids))
        values = [json.dumps([batch, task, s]) for s in range(rows(batch, task))]
        partitions = [(task + s) % WRITTEN_PARTITIONS for s in range(rows(batch, task))]

        def batches() -> Iterator[pa.RecordBatch]:
            yield pa.RecordBatch.from_pydict({"value": values, "partition": partitions})
            if dies == "before":
                raise TaskKilled

        try:
            return writer.write(batches())
        except TaskKilled:
            return None
        except KafkaEosError as error:  # the attempt fails; Spark retries the task
            event(f"task failed: {type(error).__name__}")
            return None

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
        if fate == "zombie":  # runs later, after its task was given up on, with its batch's writer
            self.zombies.append(_Zombie(self.batch, task, attempt, pickle.dumps(self.writer)))
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
        self.zombies.pop(data.draw(st.integers(0, len(self.zombies) - 1))).run(self)
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
        messages = list(self.messages.values())
        error = self.commit()
        if error is not None:
            self.failed(error)
            self.abort_batch(messages)

    def commit(self) -> Exception | None:
        """Driver: ``commit(messages, N)``, then Spark writes ``commits/N``; the error commit
        raised, if any (Spark then aborts the batch)."""
        assert self.writer is not None
        batch, messages = self.batch, list(self.messages.values())
        self.injected = []
        try:
            self.writer.commit(messages, batch)
            self.faults.step(f"write commits/{batch}", lambda: self.commit_log.add(batch))
        except SimulatedCrash as crash:
            event(f"crash {crash.where}")
            self.query_fails()
            return None
        except Exception as error:
            return error
        event("batch committed")
        self.a_committed_batch_is_visible(batch)
        self.batch += 1
        self.messages = {}
        self.attempts = Counter()
        self.plan_next_batch()
        return None

    def plan_next_batch(self) -> None:
        """Spark plans batch N + 1 in the same driver: it builds that batch's writer, which
        settles the markers of the decision just confirmed before any of its tasks runs."""
        error = self.build_writer()
        if error is not None:
            self.query_fails()
            self.failed(error)

    @named
    def a_committed_batch_is_visible(self, batch: int) -> None:
        assert self.expected(batch) <= Counter(self.kafka.visible), "committed but not visible"

    @precondition(lambda self: not self.stopped_by_loss)
    @rule()
    def faults_stop_and_the_next_batch_commits(self) -> None:
        """Liveness: every invariant holds for a sink that never commits (each error is
        absorbed, and Spark retries), so once faults stop and the query restarts, batch N
        must commit, its records visible and ``commits/N`` written, within
        ``RESTARTS_TO_COMMIT`` restarts (each task may fail once), unless the query stops on
        a loss the rules allow. The model's conditions that are not faults end too (coordinators
        loaded, markers written). Errors are collected, not excused: no fault is armed."""
        self.faults.stop()
        self.kafka.calm()
        batch, errors = self.batch, []
        for _ in range(RESTARTS_TO_COMMIT):
            self.query_fails()  # Spark's restart: after a failed query, or a redeployment
            messages: list[Any] = []
            error = self.start()
            if error is None and self.writer is not None:
                for task in range(TASKS):
                    self.run_task(task, "ok")
                    self.run_task(task, "ok")  # Spark's retry of a failed attempt
                if len(self.messages) < TASKS:
                    errors.append(f"tasks {sorted(set(range(TASKS)) - set(self.messages))} failed")
                    continue
                messages = list(self.messages.values())
                error = self.commit()
            if self.batch > batch:
                self.no_committed_range_stays_open()
                return
            if isinstance(error, UNFORCED_FAILURES):
                self.failed(error)  # checks that the loss or refusal is one the rules allow
                if self.stopped_by_loss:
                    return
            if error is not None and self.writer is not None:
                self.abort_batch(messages)  # what Spark does when commit() raised
            errors.append(repr(error))
        self.the_next_batch_commits_once_faults_stop(batch, errors)

    @named
    def no_committed_range_stays_open(self) -> None:
        """Once faults stop and a batch commits, no partition holds a committed transaction's
        range open: the sink wrote every COMMIT marker a coordinator skipped."""
        assert not self.kafka.owed(), f"COMMIT markers never written: {self.kafka.owed()}"

    @named
    def the_next_batch_commits_once_faults_stop(self, batch: int, errors: list[str]) -> None:
        assert self.batch > batch and batch in self.commit_log, (
            f"batch {batch} did not commit in {RESTARTS_TO_COMMIT} restarts without faults: "
            f"{errors}"
        )

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
    @named
    def no_record_is_visible_twice(self) -> None:
        twice = [r for r, n in Counter(self.kafka.visible).items() if n > 1]
        assert not twice, f"duplicates: {twice}"

    @invariant()
    @named
    def no_aborted_record_is_visible(self) -> None:
        """A COMMIT marker never closes a range that an aborted transaction began: one the
        coordinator skipped the ABORT marker of, joined by a later transaction of the id."""
        aborted = self.kafka.aborted_but_visible()
        assert not aborted, f"aborted, then made visible: {aborted}"

    @invariant()
    @named
    def every_batch_spark_recorded_is_visible(self) -> None:
        visible = Counter(self.kafka.visible)
        for batch in self.commit_log:
            assert self.expected(batch) <= visible, f"batch {batch} lost records"

    @invariant()
    @named
    def nothing_is_committed_that_no_durable_decision_names(self) -> None:
        """Checked at the instant of each commit (``_Commits``): a decision that became
        durable only later, or that a power loss took back, does not count."""
        assert not self.commits.undecided, self.commits.undecided
        assert self.kafka.committed <= self.decided_keys()

    @invariant()
    @named
    def decided_transactions_are_aborted_only_by_their_timeout(self) -> None:
        """The sink never aborts, fences or lets another attempt fence a decided
        transaction; only the coordinator's clock may end one, and then the batch is never
        recorded as done (checked above) and the query stops loudly."""
        aborted = self.decided_keys() & self.kafka.aborted
        assert aborted <= self.kafka.timed_out, f"decided, then aborted: {aborted}"

    @invariant()
    @named
    def a_running_query_has_no_unconfirmed_decision(self) -> None:
        """Recovery commits every decided batch when the writer is built, before any task
        runs: a started query never carries an unconfirmed decision into its batches."""
        if self.writer is not None:
            assert set(self.ledger.decided) <= self.ledger.confirmed, "started unrecovered"

    @invariant()
    def no_violation_was_recorded(self) -> None:
        """Violations noticed inside the sink, failed here under their own names."""
        if self.violations:
            raise self.violations[0]

    @invariant()
    @named
    def nothing_beyond_the_current_batch_is_visible(self) -> None:
        assert all(record[0] <= self.batch for record in self.kafka.visible)


class _Zombie(NamedTuple):
    """A task attempt Spark gave up on, still running on its executor with the writer its
    batch shipped to it (a later batch's writer knows this batch as decided, and writes
    nothing for it)."""

    batch: int
    task: int
    attempt: int
    writer: bytes

    def run(self, machine: SparkOnModelKafka) -> None:
        machine.run_attempt(self.batch, self.task, self.attempt, dies=None, shipped=self.writer)


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
        except InjectedFailure as failure:
            self._machine.injected.append(failure)
            raise

    def stop(self) -> None:
        """No fault is armed any more."""
        self.crash_in = self.fail_in = self.interleave_in = None
        self.crash_at = self.lose_answer_at = self.crash_inside = None

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
        if self._due("interleave_in") and machine.zombies:
            machine.zombies.pop(0).run(machine)
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
        """Runs inside the sink's store write: a violation is recorded on the machine, which
        fails it after the step (``no_violation_was_recorded``), whatever the sink catches."""
        try:
            self.decisions_name_open_transactions_with_the_margin(name, data)
        except InvariantViolated as violation:
            self._machine.violations.append(violation)

    @named
    def decisions_name_open_transactions_with_the_margin(self, name: str, data: bytes) -> None:
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
    d: TxnDescription, producer_id: int, epoch: int, *, bump_possible: bool, start_time_ms: int = -1
) -> bool:
    """The oracle before the rolling-upgrade fix: a V2 coordinator's answer needs E + 1."""
    expected = epoch + 1 if bump_possible else epoch
    return (
        d.state == TxnState.COMPLETE_COMMIT
        and (d.producer_id, d.epoch) == (producer_id, expected)
        and d.began_at(start_time_ms)
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


_shipped_notify = TwoPhaseCommit.notify_complete


def _notify_with_a_bug_in_its_failure_path(commit: TwoPhaseCommit, snapshot: Snapshot) -> None:
    """A failed commit (a lost EndTxn answer, say) meets a bug in the code that handles it:
    the bug's error has the injected failure in its cause chain, and is no excuse."""
    try:
        _shipped_notify(commit, snapshot)
    except CheckpointCommitFailed as failed:
        raise KeyError(failed.failed[0]) from failed


def _never_delivers(writer: ExactlyOnceWriter, checkpoint_id: int, batches: Any) -> Any:
    raise DeliveryFailed("a record could not be delivered")


def _always_times_out(
    commit: TwoPhaseCommit, checkpoint_id: int, committables: Any, **keywords: Any
) -> Any:
    raise DeadlineExceeded("commit did not finish within 5 s")


SEEDED_BUDGET = 1000
SEEDED_STEPS = 25
# The commit oracle's bugs, which a random search met too seldom to keep a seed for (one seed
# of ten, and none once the machine planned each batch's writer): each is found on the
# schedule that needs the oracle (test_a_commit_oracle_bug_is_found_on_its_schedule).
ORACLE_BUGS = {
    # The oracle before the rolling-upgrade fix: V2 coordinators accept only E + 1.
    "commit oracle blind to a V1 commit at a V2 coordinator": SeededBug(
        "an_undetermined_outcome_is_hidden",
        (mock.patch.object(TxnDescription, "is_commit_of", _exactly_one_epoch),),
    ),
    # No commit recognised: a re-driven commit after a crash reports a false loss.
    "commit oracle that never recognises a commit": SeededBug(
        "an_undetermined_outcome_is_hidden",
        (mock.patch.object(TxnDescription, "is_commit_of", lambda *a, **k: False),),
    ),
}
SEEDED_BUGS = {
    # Every attempt of a task on one id, taken without looking: a speculative copy or a
    # zombie fences the transaction the driver verified or decided (issue 11, finding 1).
    "id reuse without fencing guard": SeededBug(
        "only_the_clock_refuses_a_pre_commit",
        (
            mock.patch.object(
                TransactionalIdNaming, "slots", lambda n, p, a, t: [n.transactional_id(p, 0)]
            ),
            mock.patch.object(
                ExactlyOnceWriter, "_producer_on_a_free_id", _no_describe_before_init
            ),
        ),
    ),
    # Deciding what nobody checked: an expired or fenced transaction is decided.
    "decide without verify": SeededBug(
        "decisions_name_open_transactions_with_the_margin",
        (mock.patch.object(KafkaCommitter, "verify", lambda c, n, cs: None),),
    ),
    # Spark's abort after a commit that failed past the decision drops the decided batch.
    "abort of a decided batch": SeededBug(
        "decided_transactions_are_aborted_only_by_their_timeout",
        (mock.patch.object(TwoPhaseCommit, "_decided_committables", lambda p, cid: ()),),
    ),
    # Recovery skipped at start-up: a decided batch waits for its replay, and may time out.
    "no recovery before the tasks": SeededBug(
        "a_running_query_has_no_unconfirmed_decision",
        (mock.patch.object(TwoPhaseCommit, "recover_decided", lambda p: None),),
    ),
    # The sweep aborts what the batch itself names: every batch is refused, forever.
    "sweep aborts the batch's own transactions": SeededBug(
        "only_the_clock_refuses_a_pre_commit",
        (mock.patch.object(KafkaCommitter, "abort_lingering", _sweep_everything),),
    ),
    # The decision renamed into place before its bytes are on disk: after a power loss the
    # name may stand with no content (delayed allocation, as in ext4 and XFS).
    "rename without fsync of the temporary's data": SeededBug(
        "nothing_is_committed_that_no_durable_decision_names",
        (mock.patch.object(_LocalFileSystem, "write_atomic", _write_atomic_without("file")),),
    ),
    # A rename is durable only once its directory is fsynced (fsync(2)): a power loss undoes it.
    "no directory fsync after the rename": SeededBug(
        "nothing_is_committed_that_no_durable_decision_names",
        (mock.patch.object(_LocalFileSystem, "write_atomic", _write_atomic_without("directory")),),
    ),
    # A new process acts on what it lists without fsyncing the directory first: a decision
    # its dead predecessor renamed but never made durable is committed, then a power loss
    # takes the decision back and Spark replays the batch (the bug this machine found).
    "a new process trusts a rename that is not durable": SeededBug(
        "nothing_is_committed_that_no_durable_decision_names",
        (mock.patch.object(_LocalFileSystem, "_settle", lambda fs, directory: None),),
    ),
    # Liveness: every task attempt fails to deliver; nothing unsafe ever happens.
    "a writer that never delivers": SeededBug(
        "the_next_batch_commits_once_faults_stop",
        (mock.patch.object(ExactlyOnceWriter, "write_and_pre_commit", _never_delivers),),
    ),
    # Liveness: every commit times out; the decision stands, and is never committed.
    "a commit that always times out": SeededBug(
        "the_next_batch_commits_once_faults_stop",
        (mock.patch.object(TwoPhaseCommit, "complete", _always_times_out),),
    ),
    # The COMMIT markers a V2 coordinator skipped (KAFKA-20734) never written: the range stays
    # open, and a later transaction of the id joins it.
    "no COMMIT marker settled before the tasks": SeededBug(
        "no_committed_range_stays_open",
        (mock.patch.object(spark_sink, "settle_newest_decision", lambda p, c: []),),
    ),
    # A real bug raised while handling an injected failure is not excused by it.
    "a bug in the handling of a failed commit": SeededBug(
        "the_driver_fails_only_from_injected_faults",
        (
            mock.patch.object(
                TwoPhaseCommit, "notify_complete", _notify_with_a_bug_in_its_failure_path
            ),
        ),
    ),
}


# The seed of each search: the one that finds the bug soonest (the widest margin under the
# budget, and a short CI run), searched with the local constants removed (no_local_constants),
# so a seed no longer depends on which modules are imported. Explicit, because
# derandomize=True seeds from a digest of the machine's source, so any edit of the class
# reshuffled every search. Searched again when the model network (coordinator moves, delayed
# markers) and the progress rule met in one machine: seeds 0-3 for every bug (docs/testing.md
# reports them), then 4-12 for the two oracle bugs, which no seed of 0-7 finds and seed 8 finds
# after 916 schedules (the same schedule for both). Searched again on 2026-11-29, when each
# start began to look at the newest decision's partitions (more requests, and waits on the
# model clock): seeds 0-9 for the three bugs whose seed failed, of which seed 3 finds both
# oracle bugs (620 schedules) and seed 1 the abort of a decided batch (319). Searched again
# the same day, when a failed task began to leave its transaction to the driver's fence (and a
# fence to look for skipped ABORT markers): seeds 0-5 for the abort of a decided batch, of
# which only seed 0 finds it (100 schedules); the others now hit a fence of a batch that had
# already committed first, which aborts nothing. Searched again once the model skipped markers
# of offline leaders, Spark built a writer per batch and restarts numbered task attempts from
# 0: seeds 0-9 for the bugs whose seed failed (docs/testing.md), and 0-7 for the new one.
# `make power` counts the seeds that find each bug. Changed rules draw other schedules from the
# same seed: search again then.
SEEDS = {
    "a bug in the handling of a failed commit": 0,
    "a commit that always times out": 0,
    "a new process trusts a rename that is not durable": 2,
    "a writer that never delivers": 0,
    "abort of a decided batch": 3,
    "decide without verify": 0,
    "id reuse without fencing guard": 3,
    "no COMMIT marker settled before the tasks": 2,
    "no directory fsync after the rename": 0,
    "no recovery before the tasks": 0,
    "rename without fsync of the temporary's data": 0,
    "sweep aborts the batch's own transactions": 0,
}


def hunt_bug(bug: str, at_seed: int) -> tuple[str | None, int]:
    """The invariant ``bug`` breaks from ``at_seed`` within the budget, and the schedules."""
    return hunt(
        SparkOnModelKafka, SEEDED_BUGS[bug], at_seed, budget=SEEDED_BUDGET, steps=SEEDED_STEPS
    )


@pytest.mark.parametrize("bug", sorted(SEEDED_BUGS))
def test_a_seeded_bug_in_the_shipped_sink_is_found(bug: str) -> None:
    """The machine's power, checked: each bug breaks the invariant it is meant to break, by
    name, within a fixed budget from a fixed seed."""
    assert_seeded_bug_found(bug, SEEDED_BUGS, SEEDS, hunt_bug)


@contextlib.contextmanager
def directed(events: list[str] | None = None) -> Iterator[SparkOnModelKafka]:
    """The machine driven step by step outside Hypothesis: its events go to ``events``."""
    machine = SparkOnModelKafka()
    record = (lambda *_: None) if events is None else events.append
    try:
        with mock.patch.object(sys.modules[__name__], "event", record):
            yield machine
    finally:
        machine.teardown()


def _batch_0_with_its_first_commit_answer_lost(machine: SparkOnModelKafka) -> None:
    machine.setup(v2=False)
    for task in range(TASKS):
        machine.run_task(task, "ok")
    machine.the_next_end_txn_answer_is_lost()


@pytest.mark.parametrize("bug", [None, *sorted(ORACLE_BUGS)])
def test_a_commit_oracle_bug_is_found_on_its_schedule(bug: str | None) -> None:
    """The oracle's schedule: batch 0's first commit takes effect on a V1 coordinator and its
    answer is lost, the driver gives up, the cluster upgrades to transactions V2, and the
    restart's recovery re-drives the commit, which the coordinator now refuses. Shipped, the
    oracle recognises the commit; each bug calls it undetermined while the coordinator still
    shows it."""
    assert bug is None or not misfits(ORACLE_BUGS[bug]), "a patch that its call would break"
    with directed() as machine:
        _batch_0_with_its_first_commit_answer_lost(machine)
        machine.commit_batch(None)
        assert machine.writer is None and machine.kafka.committed  # one commit took effect
        while not machine.kafka.v2:
            machine.rolling_upgrade_to_v2(1)
        with contextlib.ExitStack() as stack:
            for patch in ORACLE_BUGS[bug].patches if bug else ():
                stack.enter_context(patch)
            if bug is None:
                machine.start_query()
                assert machine.writer is not None and not machine.stopped_by_loss
                assert set(machine.ledger.decided) <= machine.ledger.confirmed
                return
            with pytest.raises(InvariantViolated) as violation:
                machine.start_query()
        assert violation.value.invariant == ORACLE_BUGS[bug].invariant


@pytest.mark.parametrize("with_bug", [False, True], ids=["shipped", "bug"])
def test_an_error_raised_while_handling_an_injected_failure_is_no_excuse(with_bug: bool) -> None:
    """A lost EndTxn answer fails the commit: its DeadlineExceeded, inside the commit's
    failure, is excused. A KeyError raised while handling that failure has the injected fault
    in its cause chain, which the machine once took for an excuse; it is a bug."""
    bug = SEEDED_BUGS["a bug in the handling of a failed commit"].patches
    with directed() as machine:
        _batch_0_with_its_first_commit_answer_lost(machine)
        with contextlib.ExitStack() as stack:
            for patch in bug if with_bug else ():
                stack.enter_context(patch)
            if not with_bug:
                machine.commit_batch(None)
                assert machine.writer is None and machine.batch == 0  # failed, and excused
                return
            with pytest.raises(InvariantViolated) as violation:
                machine.commit_batch(None)
        assert violation.value.invariant == "the_driver_fails_only_from_injected_faults"
        assert "KeyError" in str(violation.value)


@pytest.mark.parametrize("with_bug", [False, True], ids=["shipped", "bug"])
def test_a_transaction_that_joins_a_timed_out_range_is_refused(with_bug: bool) -> None:
    """Batch 0's tasks pre-commit, and the driver dies. While the query is down, the
    coordinator times their transactions out, and skips the ABORT markers of the partition
    whose leader is offline (KAFKA-20734): nothing of the sink saw that abort. The replay takes
    the same ids, and the leader is back for its commit. Shipped, the joined-range check
    refuses the task attempt that joins the open range, and its retry takes another id; without
    the check, the commit makes the aborted records visible. Directed: a random search meets
    this schedule too seldom (no seed of 0 to 7 within the budget)."""
    events: list[str] = []
    unchecked = mock.patch.object(ExactlyOnceWriter, "_refuse_a_joined_range", lambda w, c, t: None)
    with directed(events) as machine:
        machine.setup(v2=True)
        machine.a_partition_leader_goes_offline(partition=1, seconds=90)
        for task in range(TASKS):  # tasks 1 and 2 write to partition 1
            machine.run_task(task, "ok")
        machine.driver_crash()
        machine.long_outage()  # 70 s: past the timeout, within the leader's 90
        machine.kafka.settle()  # the coordinator's timer: it aborts them
        assert machine.kafka.skipped == 2 and len(machine.kafka.timed_out) == 2
        machine.start_query()
        machine.time_passes(20)  # the leader is back
        with unchecked if with_bug else contextlib.nullcontext():
            if not with_bug:
                machine.run_batch(["ok"] * TASKS, 0, None)
                assert "task failed: DeliveryFailed" in events  # the check refused it
                assert 0 in machine.commit_log  # its retry, on another id
                machine.no_aborted_record_is_visible()
                machine.no_record_is_visible_twice()
                return
            machine.run_batch(["ok"] * TASKS, 0, None)
            with pytest.raises(InvariantViolated) as violation:
                machine.no_aborted_record_is_visible()
        assert violation.value.invariant == "no_aborted_record_is_visible"


def test_a_zombie_of_a_committed_batch_writes_with_the_writer_its_batch_shipped() -> None:
    """Once batch 0 committed, Spark's writer of batch 1 knows batch 0 as decided and would
    write nothing for it: a zombie of batch 0 runs with the writer batch 0 shipped to it, and
    its records reach the log (in a transaction nobody commits)."""
    with directed() as machine:
        machine.setup(v2=True)
        machine.run_task(1, "zombie")
        for task in range(TASKS):
            machine.run_task(task, "ok")
        machine.commit_batch(None)
        assert machine.batch == 1 and machine.writer is not None  # batch 1's writer built
        logged = sum(len(log) for log in machine.kafka.logs.values())
        visible = sorted(machine.kafka.visible)
        machine.zombies.pop(0).run(machine)
        assert sum(len(log) for log in machine.kafka.logs.values()) == logged + rows(0, 1)
        assert sorted(machine.kafka.visible) == visible


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
    with directed() as machine:
        machine.setup(v2=v2)
        machine.task_attempt_ids = itertools.repeat(0)  # every attempt starts at its number
        machine.run_task(1, "zombie")
        machine.stage_resubmitted()
        for task in range(TASKS):
            machine.run_task(task, "ok")
        shipped_step = machine.faults.step

        def zombie_then_crash(where: str, effect: Any, torn: Any = None) -> Any:
            if where == "write 0.confirmed.json" and machine.zombies:
                machine.zombies.pop(0).run(machine)
                raise SimulatedCrash(where)
            return shipped_step(where, effect, torn)

        machine.faults.step = zombie_then_crash  # type: ignore[method-assign]
        machine.commit_batch(None)
        machine.faults.step = shipped_step  # type: ignore[method-assign]
        assert machine.expected(0) <= Counter(machine.kafka.visible)  # committed
        machine.start_query()  # the machine checks that an undetermined outcome is hidden
        assert not machine.stopped_by_loss
