"""The chaos run: a Kafka -> Spark -> Kafka query under a seeded schedule of faults.

    python -m integration_tests.chaos.run --seed 7 --mode short [--kafka-version 4.3.1]

Prints its seed first; the same seed replays the same schedule (the moments are watched for, so
where a fault lands inside its phase can differ). The input is fed at a steady rate while the
faults run, so that every fault meets batches in flight. Each driver kill ends a run of the job,
and the next run starts from the same checkpoint. At the end the query catches up, stops, and
:mod:`integration_tests.chaos.checker` reads the output with two clients.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from checkpoint.crashpoints import ENV as CRASH_ENV
from checkpoint.crashpoints import HITS_DIR_ENV
from connectors.kafka.partition_txns import OpenOnPartition, open_on_partitions
from connectors.kafka.sink.committer import KafkaCommitter
from connectors.kafka.sink.marker_repair import REPAIRED
from connectors.kafka.transactions import TransactionAdmin
from integration_tests.chaos import faults
from integration_tests.chaos.checker import Verdict, check
from integration_tests.chaos.faults import Gate, Watch
from integration_tests.chaos.job import WINDOW_MS
from integration_tests.chaos.plan import DRIVER_POINTS, Fault, FaultKind, Target, plan
from integration_tests.sink.harness import inject
from integration_tests.sink.transactions import commit_visibly
from integration_tests.topics import create_topic
from kafka_eos.cluster import ProcessCluster
from kafka_eos.operations.hanging import abort_refusal, partitions_of

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SESSION_TIMEOUT_MS = 4000  # the brokers' broker.session.timeout.ms: a pause outlasts it


@dataclass(frozen=True)
class Mode:
    per_kind: dict[FaultKind, int]  # faults of each kind
    min_records: int  # the feed goes on until both this many records and the faults are done
    rate: int  # records a second, below 1,000 (see Feeder)
    max_offsets_per_trigger: int


MODES = {
    # Driver kills cost a restart of Spark each (JVMs, executors): the fewest the issue allows.
    # While faults follow each other a batch takes 10 to 20 s, so the query falls behind the
    # feed and the tail after the last fault (catch-up, two readers) is that backlog: at 200
    # records a second and 2,000 a batch, 28,000 records in 17 batches, 32 s (2026-11-29). At
    # 100 a second and 5,000 a batch the backlog is a few batches, and they still carry
    # hundreds of records each.
    "short": Mode(
        per_kind={
            FaultKind.DRIVER: 3,
            FaultKind.EXECUTOR: 5,
            FaultKind.BROKER_KILL: 6,
            FaultKind.BROKER_PAUSE: 6,
        },
        min_records=15_000,
        rate=100,
        max_offsets_per_trigger=5_000,
    ),
    "long": Mode(
        per_kind=dict.fromkeys(FaultKind, 50),
        min_records=1_000_000,
        rate=900,
        max_offsets_per_trigger=20_000,
    ),
}


@dataclass
class Report:
    seed: int
    mode: str
    kafka_version: str
    two_clusters: bool
    faults: list[dict[str, object]] = field(default_factory=list)
    job_runs: int = 0
    markers_repaired: int = 0  # COMMIT and ABORT markers the sink wrote that a coordinator skipped
    seconds: float = 0.0
    verdict: dict[str, object] = field(default_factory=dict)

    def add(self, fault: Fault, started: float, observed: str) -> None:
        entry = {
            "kind": fault.kind.value,
            "target": fault.target.name.lower(),
            "observed": observed,
        }
        self.faults.append({**entry, "at_s": round(time.monotonic() - started, 1)})
        print(f"[chaos] {len(self.faults):3d} {fault.describe()}: {observed}", flush=True)


class Feeder(threading.Thread):
    """Input records at a steady rate until told to stop and ``minimum`` were written: key
    ``k<i>`` (seeded), value the sequence number n, timestamp ``t0 + n`` ms (event time that
    stays behind the wall clock, which brokers require, at any rate below 1,000 a second)."""

    def __init__(self, bootstrap: str, topic: str, seed: int, rate: int, minimum: int) -> None:
        super().__init__(daemon=True)
        self.topic, self.rate, self.minimum = topic, rate, minimum
        self._rng = random.Random(seed ^ 0xFEED)
        self._producer = Producer(
            {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 20}
        )
        self.t0 = int(time.time() * 1000) // WINDOW_MS * WINDOW_MS - 60_000
        self.written = 0
        self.faults_done = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            step = max(1, self.rate // 10)
            while not (self.faults_done.is_set() and self.written >= self.minimum):
                for _ in range(step):
                    key = f"k{self._rng.randrange(64)}"
                    self._producer.produce(
                        self.topic,
                        key=key,
                        value=str(self.written),
                        timestamp=self.t0 + self.written,
                    )
                    self.written += 1
                self._producer.poll(0)
                time.sleep(0.1)
            assert self._producer.flush(120) == 0, "input records not acknowledged"
        except BaseException as exc:  # surfaced by the run
            self.error = exc


class Chaos:
    def __init__(
        self,
        seed: int,
        mode: str,
        source: ProcessCluster,
        sink: ProcessCluster,
        workdir: Path,
        master: str = "local-cluster[1,2,1024]",
        per_kind: int | None = None,
    ) -> None:
        self.per_kind = per_kind
        self.seed, self.mode, self.settings = seed, mode, MODES[mode]
        self.source, self.sink = source, sink
        self.rng = random.Random(seed)
        self.workdir, self.master = workdir, master
        self.prefix = f"chaos-{uuid.uuid4().hex[:8]}"
        self.input = create_topic(source.bootstrap_servers, partitions=4)
        self.output = create_topic(sink.bootstrap_servers, partitions=4)
        self.checkpoint = workdir / "checkpoint"
        self.watch = Watch(sink.bootstrap_servers, self.output, self.checkpoint, self.prefix)
        self.report = Report(seed, mode, sink.version, source is not sink)

    # -- the run -----------------------------------------------------------------------------

    def run(self) -> Report:
        started = time.monotonic()
        per_kind = self.settings.per_kind
        if self.per_kind is not None:
            per_kind = dict.fromkeys(FaultKind, self.per_kind)
        schedule = plan(self.seed, per_kind, session_timeout_s=SESSION_TIMEOUT_MS / 1000)
        print(f"[chaos] seed {self.seed}: {len(schedule)} faults, {self.mode} mode", flush=True)
        feeder = Feeder(
            self.source.bootstrap_servers,
            self.input,
            self.seed,
            self.settings.rate,
            self.settings.min_records,
        )
        feeder.start()
        pending = list(schedule)
        while True:
            # A run of the job lasts until its driver is killed: the next driver kill's point is
            # armed (open) for the whole run, and closed when its turn comes.
            driver = next((f for f in pending if f.kind is FaultKind.DRIVER), None)
            with self._job(driver) as (job, gate):
                if self._faults_until_driver_kill(job, gate, pending, started):
                    continue
                feeder.faults_done.set()
                self._catch_up(job, feeder)
                break
        feeder.faults_done.set()
        feeder.join()
        if feeder.error is not None:
            raise feeder.error
        verdict = self._verdict(feeder.t0)
        self.report.markers_repaired = sum(
            (run / "job.log").read_text(errors="replace").count(REPAIRED)
            for run in self.workdir.glob("run-*")
        )
        self.report.seconds = round(time.monotonic() - started, 1)
        self.report.verdict = {**asdict(verdict), "failures": verdict.failures}
        return self.report

    def _faults_until_driver_kill(
        self, job: subprocess.Popen[str], gate: Gate | None, pending: list[Fault], started: float
    ) -> bool:
        """Inject the pending faults in order; True once one killed the driver. With the faults
        removed (``make test-faults-removed``), each is recorded and skipped, and the verdict
        must then fail: no aborted record."""
        while pending:
            fault = pending.pop(0)
            self._check_alive(job)
            if not inject(fault.describe()):
                self.watch.batches_pass(1)  # the moment it would have waited for
                self.report.add(fault, started, "removed")
                continue
            if fault.kind is FaultKind.DRIVER:
                assert gate is not None
                self.report.add(fault, started, self._kill_driver(job, gate, fault))
                return True
            self.report.add(fault, started, self._inject(job, fault))
        return False

    @contextmanager
    def _job(self, driver: Fault | None) -> Iterator[tuple[subprocess.Popen[str], Gate | None]]:
        """One run of the query, its next driver kill's point armed; killed if still running
        when the block ends."""
        self.report.job_runs += 1
        run_dir = self.workdir / f"run-{self.report.job_runs}"
        env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
        gate = None
        if driver is not None:
            gate = Gate(run_dir, DRIVER_POINTS[driver.target])
            env[CRASH_ENV], env[HITS_DIR_ENV] = gate.spec, str(run_dir)
        command = [
            sys.executable, "-m", "integration_tests.chaos.job",
            "--source-bootstrap", self.source.bootstrap_servers,
            "--sink-bootstrap", self.sink.bootstrap_servers,
            "--input", self.input, "--output", self.output,
            "--checkpoint", str(self.checkpoint), "--prefix", self.prefix,
            "--master", self.master,
            "--max-offsets-per-trigger", str(self.settings.max_offsets_per_trigger),
            "--stop-when", str(self.workdir / "stop"),
        ]  # fmt: skip
        run_dir.mkdir(parents=True, exist_ok=True)
        log = (run_dir / "job.log").open("w")
        job = subprocess.Popen(
            command, cwd=PROJECT_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, text=True,
            start_new_session=True,
        )  # fmt: skip
        self.watch.job = job
        try:
            yield job, gate
        finally:
            if job.poll() is None:
                faults.kill_tree(job.pid)
            job.wait()
            log.close()

    def _check_alive(self, job: subprocess.Popen[str]) -> None:
        if job.poll() is not None:
            raise AssertionError(
                f"the query exited {job.returncode} on its own: see {self.workdir}/run-"
                f"{self.report.job_runs}/job.log"
            )

    # -- the faults --------------------------------------------------------------------------

    def _kill_driver(self, job: subprocess.Popen[str], gate: Gate, fault: Fault) -> str:
        """Let ``fault.hit - 1`` batches pass, close the gate, and kill the whole job once a
        process is held at the point; what the brokers and the checkpoint showed then."""
        self.watch.batches_pass(fault.hit - 1)
        gate.close_and_wait(self.watch)
        observed = self._phase_evidence(fault.target)
        faults.kill_tree(job.pid)
        if fault.target is Target.MID_END_TXN:
            observed += "; " + self._deliver_first_end_txn()
        return observed

    def _phase_evidence(self, target: Target) -> str:
        decided = self.watch.last_decision()
        spark_done = self.watch.spark_committed()
        open_now = self.watch.open_transactions()
        return (
            f"held at {DRIVER_POINTS[target].value}: {len(open_now)} open transactions, "
            f"last decision {decided}, Spark's last commit {spark_done}"
        )

    def _deliver_first_end_txn(self) -> str:
        """The killed driver's first EndTxn(commit) of its last decision, as if it had reached
        its coordinator before the crash (EndTxns are sent all at once)."""
        batch = self.watch.last_decision()
        decision = self.watch.store().get(batch)
        assert decision is not None
        committer = KafkaCommitter({"bootstrap.servers": self.sink.bootstrap_servers}, timeout_s=60)
        try:
            commit_visibly(committer, decision.committables[0])
        finally:
            committer.close()
        return f"1 of {len(decision.committables)} EndTxns of batch {batch} delivered"

    def _inject(self, job: subprocess.Popen[str], fault: Fault) -> str:
        self.watch.batches_pass(fault.hit - 1)
        if fault.kind is FaultKind.EXECUTOR:
            return self._kill_executor(job, fault)
        if fault.kind is FaultKind.BROKER_PAUSE:
            open_now = self.watch.producing()
            node = self.rng.choice(self.sink.running_node_ids)
            faults.pause(self.sink, node, fault.hold_s)
            return f"broker {node} paused {fault.hold_s:.1f} s, {len(open_now)} transactions open"
        if fault.target is Target.OUTPUT_LEADER:
            open_now = self.watch.producing()
            leaders = self.watch.wait(self.watch.leaders, "an output partition's leader")
            assert isinstance(leaders, dict)
            partition, node = self.rng.choice(sorted(leaders.items()))
            faults.kill_and_restart(self.sink, node, fault.hold_s)
            return f"leader {node} of partition {partition} killed, {len(open_now)} open"
        return self._kill_coordinator(fault)

    def _kill_executor(self, job: subprocess.Popen[str], fault: Fault) -> str:
        self.watch.producing()
        found = self.watch.wait(lambda: faults.executors(job.pid), "an executor JVM")
        assert isinstance(found, list)
        if fault.target is Target.EXECUTOR_JVM:
            return "executor " + faults.kill_one(found, self.rng)
        executor = self.rng.choice(found)
        workers = self.watch.wait(lambda: faults.python_workers(executor), "a Python worker")
        assert isinstance(workers, list)
        return "Python worker " + faults.kill_one(workers, self.rng)

    def _kill_coordinator(self, fault: Fault) -> str:
        """Find the coordinator of a transaction in flight, and kill it the moment its batch's
        decision appears: its EndTxn and markers are then in progress."""
        before = self.watch.last_decision()
        open_now = self.watch.producing()
        coordinators = self.watch.wait(
            lambda: self.watch.coordinators(open_now), "the open transactions' coordinators"
        )
        assert isinstance(coordinators, set)
        node = self.rng.choice(sorted(coordinators))
        self.watch.wait(lambda: self.watch.last_decision() > before, "the batch's decision")
        faults.kill_and_restart(self.sink, node, fault.hold_s)
        return f"coordinator {node} killed as batch {before + 1}'s decision appeared"

    # -- the end -----------------------------------------------------------------------------

    def _catch_up(self, job: subprocess.Popen[str], feeder: Feeder) -> None:
        """Wait until the feed ended and Spark committed a batch ending at the input's end, then
        stop the query."""
        feeder.join()
        found = self.watch.wait(self._input_end, "the input's end offsets")
        assert isinstance(found, dict)
        end = found
        self.watch.wait(
            lambda: self._committed_end() == end, "the query to read the input to its end", 900
        )
        # The batch after it, which the watermark's advance makes Spark run without new data,
        # emits the windows that the input's newest records closed.
        self.watch.batches_pass(1)
        (self.workdir / "stop").touch()
        job.wait(timeout=120)
        assert job.returncode == 0, f"the query's last run exited {job.returncode}"

    def _input_end(self) -> dict[str, int]:
        consumer = Consumer({"bootstrap.servers": self.source.bootstrap_servers, "group.id": "x"})
        try:
            partitions = consumer.list_topics(self.input, timeout=30).topics[self.input].partitions
            return {
                str(p): consumer.get_watermark_offsets(TopicPartition(self.input, p), 30)[1]
                for p in partitions
            }
        finally:
            consumer.close()

    def _committed_end(self) -> dict[str, int] | None:
        """The end offsets of the last batch in Spark's ``commits/``, from ``offsets/``."""
        done = self.watch.spark_batches("commits")
        return self.watch.batch_end(done[-1], self.input) if done else None

    def _verdict(self, t0_ms: int) -> Verdict:
        with TransactionAdmin({"bootstrap.servers": self.sink.bootstrap_servers}) as admin:
            left = admin.list_transactional_ids(self.prefix)
            partitions = partitions_of(admin.kafka_admin, [self.output])
            left += [self._open_on(admin, o) for o in open_on_partitions(
                admin.kafka_admin, partitions
            )]  # fmt: skip
        source, sink = self.source.bootstrap_servers, self.sink.bootstrap_servers
        return check(source, self.input, sink, self.output, left, t0_ms, self._batch_of)

    @staticmethod
    def _open_on(admin: TransactionAdmin, o: OpenOnPartition) -> str:
        """A transaction open on an output partition, and what its coordinator says of it: one
        it committed lost its COMMIT marker to the broker bug of
        integration_tests/sink/test_skipped_commit_markers.py."""
        listed = admin.kafka_admin.list_transactions(producer_id_filters=[o.producer_id])
        ids = sorted({t.transactional_id for answer in listed.values() for t in answer})
        held = []
        for tid, d in (admin.describe(ids) if ids else {}).items():
            if d is None:
                held.append(f"{tid}: unknown")
                continue
            shown = f"{tid} shows {d.state.value} at epoch {d.epoch}, the abort that ended it"
            bumps = admin.epoch_bumps_on_end_at(d.coordinator_id)
            held.append(abort_refusal(o, d, bumps=bumps) or shown)
        return (
            f"open on {o.topic}-{o.partition} from offset {o.start_offset}: producer"
            f" {o.producer_id} epoch {o.producer_epoch}; its coordinator: {held or 'nothing'}"
        )

    def _batch_of(self, partition: int, offset: int) -> int | None:
        """The batch whose range of input ``partition`` holds ``offset``, by Spark's offsets log."""
        for batch in self.watch.spark_batches("offsets"):
            if offset < self.watch.batch_end(batch, self.input).get(str(partition), 0):
                return batch
        return None


def chaos_clusters(
    version: str, two_clusters: bool, stack: ExitStack
) -> tuple[ProcessCluster, ProcessCluster]:
    """A three-broker sink cluster (RF 3, ``min.insync.replicas`` 2) whose brokers notice a
    paused peer within ``SESSION_TIMEOUT_MS``; the source on it too, or on a broker of its own."""
    properties = {
        "broker.session.timeout.ms": str(SESSION_TIMEOUT_MS),
        "broker.heartbeat.interval.ms": "1000",
    }
    sink = stack.enter_context(ProcessCluster(version, nodes=3, broker_properties=properties))
    source = stack.enter_context(ProcessCluster(version)) if two_clusters else sink
    return source, sink


def keep_broker_logs(workdir: Path, clusters: dict[str, ProcessCluster]) -> None:
    """Copy the brokers' logs next to the job's, before the clusters are deleted."""
    for name, cluster in clusters.items():
        for node_id in cluster.node_ids:
            log = cluster.log_path(node_id)
            if log.exists():
                shutil.copy(log, workdir / f"{name}-broker-{node_id}.log")


def faults_by(report: Report) -> dict[str, dict[str, int]]:
    counted: dict[str, Counter[str]] = {}
    for fault in report.faults:
        counted.setdefault(str(fault["kind"]), Counter())[str(fault["target"])] += 1
    return {kind: dict(targets) for kind, targets in counted.items()}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--mode", choices=sorted(MODES), default="short")
    parser.add_argument("--kafka-version", default="4.3.1")
    parser.add_argument("--two-clusters", action="store_true")
    parser.add_argument("--faults-per-kind", type=int, help="instead of the mode's")
    parser.add_argument("--report", type=Path, help="write the report here as JSON")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    print(f"[chaos] seed {seed} (replay: --seed {seed})", flush=True)
    with ExitStack() as stack:
        source, sink = chaos_clusters(args.kafka_version, args.two_clusters, stack)
        workdir = Path(tempfile.mkdtemp(prefix="kafka-eos-chaos-"))
        print(f"[chaos] checkpoint and job logs in {workdir} (kept)", flush=True)
        report = Chaos(seed, args.mode, source, sink, workdir, per_kind=args.faults_per_kind).run()
        if report.verdict["failures"]:
            keep_broker_logs(workdir, {"source": source, "sink": sink})
    text = json.dumps({**asdict(report), "by_kind": faults_by(report)}, indent=2)
    if args.report:
        args.report.write_text(text)
    print(text)
    return 1 if report.verdict["failures"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
