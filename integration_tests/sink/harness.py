"""Run the pipeline under test in its own process group, crash it, and count what readers see."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from fastavro import parse_schema, schemaless_reader, schemaless_writer

from checkpoint._filesystem import open_filesystem
from checkpoint.crashpoints import ENV as CRASH_ENV
from checkpoint.crashpoints import HITS_DIR_ENV, parse_spec, struck_marker
from checkpoint.store import SnapshotStore
from connectors.kafka.sink.committer import KafkaCommitter
from connectors.kafka.sink.naming import derived_prefix
from connectors.kafka.transactions import TransactionAdmin
from connectors.kafka.txn_state import TxnDescription, TxnState
from integration_tests.sink.pipeline_job import NUMBER_SCHEMA
from integration_tests.sink.transactions import commit_visibly
from integration_tests.topics import create_topic
from kafka_eos.cluster import KafkaCluster
from kafka_eos.operations.drain import drain

PROJECT_ROOT = Path(__file__).resolve().parents[2]
KILLED = -9
# `make test-faults-removed` sets it: every run that names a fault runs without it, with the
# strike checks off, so each fault test must fail on its own assertions about the window
# (integration_tests/faults_removed.py turns that failure into the target's pass).
FAULTS_REMOVED = os.environ.get("KAFKA_EOS_TEST_REMOVE_FAULTS") == "1"
removed_faults: list[str] = []  # the faults the running test named and ran without


def inject(fault: str) -> bool:
    """Whether the test injects ``fault``, one that is not a crash point (a broker killed, a
    log entry deleted, an EndTxn sent for the crashed driver): no in removed-fault mode, which
    records it as removed, so that the test must then fail on the effect it asserts."""
    if FAULTS_REMOVED:
        removed_faults.append(fault)
        return False
    return True


@dataclass
class Pipeline:
    """One query (topic, checkpoint, prefix) that a test runs, crashes and restarts."""

    bootstrap: str
    topic: str
    checkpoint: Path
    # None: a drop-in's job, without transactionalIdPrefix and kafka.transaction.timeout.ms.
    prefix: str | None = field(default_factory=lambda: f"eos-{uuid.uuid4().hex[:8]}")
    count: int = 300
    per_batch: int = 100
    partitions: int = 2
    master: str = "local[2]"
    # Read by the kafka-eos source when set (see :func:`fill_numbers`), else numbers made up
    # by the test source: Kafka -> our source -> Spark -> our sink -> Kafka end to end.
    input_topic: str | None = None
    location: str | None = None  # how the job spells the checkpoint location, if not as a path
    hits_dir: Path | None = None  # the crash points' record of the last run with a fault
    avro: bool = False  # values are Avro records {"n": long} (NUMBER), in and out
    batch: bool = False  # one batch write of the numbers (df.write), not a stream
    sink_tasks: int | None = None  # the stream coalesced into this many tasks, if set
    # Spark settings of the job; with any spark.hadoop.fs.s3a.*, the job gets the S3A jars.
    spark_conf: dict[str, str] = field(default_factory=dict)

    @property
    def checkpoint_location(self) -> str:
        """The checkpoint as the job names it, without a trailing slash."""
        return f"{self.location or self.checkpoint}".rstrip("/")

    @property
    def transactional_id_prefix(self) -> str:
        """The prefix the sink runs with: the option, or the one it derives."""
        return self.prefix or derived_prefix(self.location or str(self.checkpoint))

    def run(
        self,
        crash_at: str | None = None,
        options: dict[str, str] | None = None,
        partitions: int | None = None,
        timeout_s: float = 300,
    ) -> subprocess.CompletedProcess[str]:
        """Run the query to its end (or its crash) and return how it exited. A fault that never
        struck fails with the job's own exit and error: what stopped it before the fault."""
        job = self.start(crash_at, options, partitions)
        try:
            stdout, stderr = job.communicate(timeout=timeout_s)
        finally:
            if job.poll() is None:
                self.kill(job)
        if crash_at:
            self.assert_struck(crash_at, f"the job exited {job.returncode}:\n{stderr[-4000:]}")
        return subprocess.CompletedProcess(job.args, job.returncode, stdout, stderr)

    def wait_until_struck(
        self, job: subprocess.Popen[str], crash_at: str, timeout_s: float = 180
    ) -> None:
        """Wait until the job is at the fault ``crash_at`` (a ``stall-until`` handshake holds it
        there until the test creates the file): the test acts in the fault's window however
        slow the machine is."""
        deadline = time.monotonic() + timeout_s
        while not self._struck(crash_at):
            if job.poll() is not None:
                stderr = job.stderr.read() if job.stderr else ""
                raise AssertionError(
                    f"the job exited {job.returncode} before {crash_at!r}:\n{stderr[-6000:]}"
                )
            assert time.monotonic() < deadline, f"{crash_at!r} not reached in {timeout_s} s"
            time.sleep(0.2)

    def assert_struck(self, crash_at: str, why: str = "") -> None:
        """The fault ``crash_at`` named did strike in the last run: a renamed point, a wrong
        batch id or hit number would otherwise let a crash test pass without crashing."""
        assert self._struck(crash_at), (
            f"the fault {crash_at!r} never struck: the test proved nothing about it. {why}"
        )

    def _struck(self, crash_at: str) -> bool:
        """Whether the fault's crash point left its marker in the last run's hits folder."""
        point = parse_spec(crash_at).point
        if FAULTS_REMOVED:
            return True
        return self.hits_dir is not None and os.path.exists(
            struck_marker(str(self.hits_dir), point)
        )

    @contextmanager
    def started(
        self,
        crash_at: str | None = None,
        options: dict[str, str] | None = None,
        partitions: int | None = None,
        stop_when: Path | None = None,
    ) -> Iterator[subprocess.Popen[str]]:
        """The query running in the background while the block acts on the cluster; a job
        still running when the block ends (a failed assertion, a timeout) is killed with its
        whole group. With ``stop_when``, the job stops its query once that file exists."""
        job = self.start(crash_at, options, partitions, stop_when)
        try:
            yield job
        finally:
            if job.poll() is None:
                self.kill(job)
        if crash_at:  # reached only when the block succeeded
            self.assert_struck(crash_at)

    def start(
        self,
        crash_at: str | None = None,
        options: dict[str, str] | None = None,
        partitions: int | None = None,
        stop_when: Path | None = None,
    ) -> subprocess.Popen[str]:
        """Start the query in the background; :meth:`started` is the safe way to use it."""
        env = {k: v for k, v in os.environ.items() if k != CRASH_ENV}
        # Executors of a local-cluster start in a work dir of their own: let their Python
        # workers import the test data source too (the installed packages they find anyway).
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(PROJECT_ROOT), env.get("PYTHONPATH")])
        )
        if crash_at and FAULTS_REMOVED:
            removed_faults.append(crash_at)
        elif crash_at:
            env[CRASH_ENV] = crash_at
            # "#N" counts hits across the job's processes, afresh for each run.
            self.hits_dir = self.checkpoint.parent / f"crash-hits-{uuid.uuid4().hex[:8]}"
            env[HITS_DIR_ENV] = str(self.hits_dir)
        command = [
            sys.executable, "-m", "integration_tests.sink.pipeline_job",
            "--bootstrap", self.bootstrap, "--topic", self.topic,
            "--checkpoint", self.location or str(self.checkpoint),
            "--count", str(self.count), "--per-batch", str(self.per_batch),
            "--partitions", str(partitions or self.partitions), "--master", self.master,
        ]  # fmt: skip
        if self.prefix is not None:
            command += ["--prefix", self.prefix]
        if self.input_topic is not None:
            command += ["--input-topic", self.input_topic]
        for key, value in (options or {}).items():
            command += ["--option", f"{key}={value}"]
        if stop_when is not None:
            command += ["--stop-when", str(stop_when)]
        if self.avro:
            command += ["--avro"]
        if self.batch:
            command += ["--batch"]
        if self.sink_tasks is not None:
            command += ["--sink-tasks", str(self.sink_tasks)]
        for key, value in self.spark_conf.items():
            command += ["--conf", f"{key}={value}"]
        if any(key.startswith("spark.hadoop.fs.s3a.") for key in self.spark_conf):
            command += ["--s3a"]
        # A session of its own: a crash point kills the whole group, never the test.
        return subprocess.Popen(
            command,
            cwd=PROJECT_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )

    def committed(self) -> Counter[int]:
        return Counter(self._number(r.value) for r in drain(self.bootstrap, self.topic))

    def uncommitted(self) -> Counter[int]:
        """Every number in the log, aborted and open transactions' too: the evidence of what
        each attempt wrote, compared key by key like :meth:`committed`."""
        return Counter(
            self._number(r.value) for r in drain(self.bootstrap, self.topic, "read_uncommitted")
        )

    def _number(self, value: bytes | None) -> int:
        if value is None:
            return -1
        return schemaless_reader(io.BytesIO(value), NUMBER)["n"] if self.avro else int(value)

    def kill(self, job: subprocess.Popen[str]) -> None:
        """kill -9 the job's whole group (driver, JVM, Python workers), as a crash point does."""
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()

    def crash(self, job: subprocess.Popen[str], timeout_s: float = 300) -> None:
        """The test's own fault: :meth:`kill` the job in the window it holds. Removed, the job
        runs to its end instead (within ``timeout_s``)."""
        if inject("kill -9 of the job by the test"):
            self.kill(job)
        else:
            job.wait(timeout_s)

    def store(self) -> SnapshotStore:
        """The sink's decisions, read through the same store the sink writes with."""
        return SnapshotStore(f"{self.checkpoint_location}/kafka-eos-sink")

    def commit_first_decided(self, batch_id: int) -> None:
        """End the first transaction of batch ``batch_id``'s decision, as the driver's EndTxn
        would: the state a crash leaves when it lands while the batch's EndTxns are in
        flight, and some reached their coordinators (they are sent all at once)."""
        if not inject(f"the first EndTxn of batch {batch_id}, sent for the killed driver"):
            return
        decision = self.store().get(batch_id)
        assert decision is not None, f"batch {batch_id} has no decision"
        committer = KafkaCommitter({"bootstrap.servers": self.bootstrap}, timeout_s=60)
        try:
            commit_visibly(committer, decision.committables[0])
        finally:
            committer.close()

    def decided_transactional_ids(self, batch_id: int) -> list[str]:
        decision = self.store().get(batch_id)
        assert decision is not None, f"batch {batch_id} has no decision"
        return [c.transactional_id for c in decision.committables]

    def delete_planned_batch(self, batch_id: int) -> None:
        """An operator's fault: delete Spark's ``offsets/<batch_id>`` (and Hadoop's checksum of
        it), so that Spark plans the batch anew. Local checkpoints only."""
        if inject(f"offsets/{batch_id} deleted"):
            for entry in (f"{batch_id}", f".{batch_id}.crc"):
                (self.checkpoint / "offsets" / entry).unlink()

    def spark_planned_batches(self) -> set[int]:
        """Batches whose offsets Spark logged: started, maybe not finished."""
        return self._batches_in("offsets")

    def spark_committed_batches(self) -> set[int]:
        """Batches Spark recorded as done; it replays any planned batch that is not here."""
        return self._batches_in("commits")

    def _batches_in(self, log: str) -> set[int]:
        """Batch ids in Spark's ``log`` folder, wherever the checkpoint is (a local path, S3)."""
        fs, folder = open_filesystem(f"{self.checkpoint_location}/{log}", None)
        return {int(n) for n in fs.list(folder) if n.isdigit()}

    def transactions(self, transactional_ids: list[str]) -> dict[str, TxnDescription | None]:
        with TransactionAdmin({"bootstrap.servers": self.bootstrap}) as admin:
            return admin.describe(transactional_ids)

    def transaction_states(self, transactional_ids: list[str]) -> dict[str, TxnState | None]:
        """The ids' states, from one describe (:func:`states_of`)."""
        return states_of(self.transactions(transactional_ids))

    def open_transactions(self) -> list[str]:
        with TransactionAdmin({"bootstrap.servers": self.bootstrap}) as admin:
            return admin.list_transactional_ids(self.transactional_id_prefix)


def states_of(described: dict[str, TxnDescription | None]) -> dict[str, TxnState | None]:
    """Each id's state, None for an id its coordinator does not know: compared whole, so that
    an id the broker forgot fails the comparison instead of dropping out of it."""
    return {tid: d.state if d else None for tid, d in described.items()}


# The batches of the default pipeline (300 numbers, 100 a batch).
NUMBER = parse_schema(NUMBER_SCHEMA)


def avro_number(n: int) -> bytes:
    buf = io.BytesIO()
    schemaless_writer(buf, NUMBER, {"n": n})
    return buf.getvalue()


BATCH_0, BATCH_1, ALL = Counter(range(100)), Counter(range(100, 200)), Counter(range(300))


def fed_pipeline(bootstrap: str, checkpoint: Path, **fields: Any) -> Pipeline:
    """The fault matrix's query: the numbers 0..299 in a topic of two partitions (so two
    tasks), read by the kafka-eos source, written to a new topic of two partitions."""
    numbers = create_topic(bootstrap, partitions=2)
    fill_numbers(bootstrap, numbers, count=300, partitions=2, avro=fields.get("avro", False))
    output = create_topic(bootstrap, partitions=2)
    return Pipeline(bootstrap, output, checkpoint, input_topic=numbers, **fields)


def fill_numbers(
    bootstrap: str, topic: str, count: int, partitions: int, *, avro: bool = False
) -> None:
    """Write the numbers 0..count-1 to ``topic``, n to partition n % partitions, in order: with
    ``maxOffsetsPerTrigger`` = per_batch the source's batch k then holds exactly the numbers
    k*per_batch .. (k+1)*per_batch-1, as the test source's would."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for n in range(count):
        value = avro_number(n) if avro else str(n)
        producer.produce(topic, key=str(n), value=value, partition=n % partitions)
    assert producer.flush(60) == 0, f"{topic}: not every input record was acknowledged"


def kill_broker(cluster: KafkaCluster, node_id: int, *, restart: bool) -> None:
    """kill -9 the broker ``node_id`` (:func:`inject`: removable), and with ``restart`` start it
    again. The test asserts the effect (a new pid, a moved coordinator), which the kill's
    removal must break."""
    if inject(f"kill -9 of broker {node_id}" + (" and its restart" if restart else "")):
        cluster.stop_node(node_id, hard=True)
        if restart:
            cluster.start_node(node_id)


def assert_ran(result: subprocess.CompletedProcess[str], expected_returncode: int = 0) -> None:
    """The run exited ``expected_returncode``. A failure's exit code (a kill, a loud stop) is
    not checked once the test ran without a fault: its state assertions must catch that."""
    if expected_returncode != 0 and removed_faults:
        return
    assert result.returncode == expected_returncode, (
        f"pipeline exited {result.returncode}, expected {expected_returncode}:\n"
        + result.stderr[-4000:]
    )


def assert_exactly_once(pipeline: Pipeline) -> None:
    """Every input's result exactly once for read_committed readers: no loss, no duplicate."""
    seen = pipeline.committed()
    expected = Counter(range(pipeline.count))
    missing = sorted((expected - seen).elements())
    duplicated = sorted((seen - expected).elements())
    assert not missing and not duplicated, (
        f"read_committed: {len(missing)} missing (first {missing[:10]}), "
        f"{len(duplicated)} duplicated/unexpected (first {duplicated[:10]})"
    )
    assert pipeline.open_transactions() == [], "transactions of the prefix left open"
