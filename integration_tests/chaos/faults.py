"""What the chaos harness breaks, and how it finds the moment: the job's process tree, the
brokers, the checkpoint and the brokers' transaction states.

Every wait here watches something (a crash point's strike, an open transaction of the prefix,
a new decision); none only sleeps. A fault that cannot find its moment fails the run with what
it waited for.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import psutil
from confluent_kafka.admin import AdminClient

from checkpoint.crashpoints import CrashPoint, struck_marker
from checkpoint.store import SnapshotStore
from connectors.kafka.transactions import TransactionAdmin
from kafka_eos.cluster import ProcessCluster

WAIT_S = 240.0  # for a moment that a running pipeline reaches within a few batches
_POLL_S = 0.05
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"


class MomentMissed(AssertionError):
    """A fault's moment never came: the run cannot claim to have tested it."""


def wait_for(
    condition: Callable[[], object],
    what: str,
    timeout_s: float = WAIT_S,
    job: subprocess.Popen[str] | None = None,
) -> object:
    """Poll ``condition`` until it gives something true, and return that; fail at once if
    ``job`` exits meanwhile."""
    deadline = time.monotonic() + timeout_s
    while True:
        if job is not None and job.poll() is not None:
            raise MomentMissed(f"the query exited {job.returncode} while waiting for {what}")
        try:
            found = condition()
        except Exception:  # a broker down or paused: the watch goes on
            found = None
        if found:
            return found
        if time.monotonic() > deadline:
            raise MomentMissed(f"waited {timeout_s:.0f} s for {what}")
        time.sleep(_POLL_S)


def kill_tree(pid: int) -> int:
    """kill -9 a process and every descendant (Python workers run in sessions of their own,
    so the group is not enough). Returns how many processes were killed."""
    try:
        root = psutil.Process(pid)
        tree = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    for process in tree:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    psutil.wait_procs(tree, timeout=30)
    return len(tree)


def executors(job_pid: int) -> list[psutil.Process]:
    """The executor JVMs of a ``local-cluster`` job, descendants of its driver."""
    found = []
    for process in psutil.Process(job_pid).children(recursive=True):
        try:
            if EXECUTOR_CLASS in process.cmdline():
                found.append(process)
        except psutil.NoSuchProcess:
            pass
    return found


def python_workers(executor: psutil.Process) -> list[psutil.Process]:
    """The Python workers of an executor JVM: the processes its ``pyspark.daemon`` forked for
    tasks (they keep its command line), else the daemon itself (killing it fails the tasks its
    workers run, too)."""
    pythons = [p for p in executor.children(recursive=True) if "python" in p.name()]
    forked = [p for p in pythons if p.ppid() != executor.pid]
    return forked or pythons


class Gate:
    """A crash point armed for the whole job run with ``stall-until=<open file>``: while the
    file exists every hit passes straight through (leaving the strike marker); once the gate is
    closed, the next hit holds its process there until the harness acts."""

    def __init__(self, folder: Path, point: CrashPoint) -> None:
        self.folder, self.point = folder, point
        self.open_file = folder / f"open-{point.value}"
        self.marker = Path(struck_marker(str(folder), point))
        folder.mkdir(parents=True, exist_ok=True)
        self.open_file.touch()

    @property
    def spec(self) -> str:
        return f"{self.point.value}:stall-until={self.open_file}"

    def close_and_wait(self, watch: Watch) -> None:
        """Close the gate, then wait until a process is held at the point."""
        self.marker.unlink(missing_ok=True)
        self.open_file.unlink()
        watch.wait(self.marker.exists, f"a hit of {self.point.value}")


class Watch:
    """The pipeline's state as the outside sees it: Spark's checkpoint, the sink's decisions
    and the brokers' transactions of its prefix."""

    def __init__(self, sink_bootstrap: str, output: str, checkpoint: Path, prefix: str) -> None:
        self.sink_bootstrap, self.output = sink_bootstrap, output
        self.checkpoint, self.prefix = checkpoint, prefix
        self.job: subprocess.Popen[str] | None = None  # the run of the query being watched

    def wait(self, condition: Callable[[], object], what: str, timeout_s: float = WAIT_S) -> object:
        """:func:`wait_for`, failing at once if the watched run of the query exits."""
        return wait_for(condition, what, timeout_s, self.job)

    def spark_batches(self, log: str) -> list[int]:
        """The batch ids in Spark's ``log`` (``offsets``: planned, ``commits``: done), sorted."""
        folder = self.checkpoint / log
        return sorted(int(n) for n in os.listdir(folder) if n.isdigit()) if folder.exists() else []

    def spark_committed(self) -> int:
        """The newest batch Spark recorded as done, -1 before the first. Not a count: Spark
        keeps only the last ``minBatchesToRetain`` (100) entries of its logs."""
        return max(self.spark_batches("commits"), default=-1)

    def batch_end(self, batch_id: int, topic: str) -> dict[str, int]:
        """Where batch ``batch_id`` ends in each partition of ``topic``, by ``offsets/``."""
        line = (self.checkpoint / "offsets" / str(batch_id)).read_text().splitlines()[-1]
        return {str(p): int(o) for p, o in json.loads(line)[topic].items()}

    def store(self) -> SnapshotStore:
        """The sink's decisions, read through the store the sink writes them with."""
        return SnapshotStore(f"{self.checkpoint}/kafka-eos-sink")

    def last_decision(self) -> int:
        """The newest batch with a decision, -1 before the first."""
        return max((int(i) for i in self.store().checkpoint_ids()), default=-1)

    def open_transactions(self) -> list[str]:
        with TransactionAdmin({"bootstrap.servers": self.sink_bootstrap}) as admin:
            return admin.list_transactional_ids(self.prefix)

    def coordinators(self, transactional_ids: list[str]) -> set[int]:
        with TransactionAdmin({"bootstrap.servers": self.sink_bootstrap}) as admin:
            described = admin.describe(transactional_ids)
        return {d.coordinator_id for d in described.values() if d is not None}

    def leaders(self) -> dict[int, int]:
        """Each output partition's leader, as the metadata shows it."""
        metadata = AdminClient({"bootstrap.servers": self.sink_bootstrap}).list_topics(
            self.output, timeout=10
        )
        partitions = metadata.topics[self.output].partitions.values()
        return {p.id: p.leader for p in partitions if p.leader >= 0}  # none while one is elected

    def producing(self) -> list[str]:
        """Wait until tasks hold open transactions of the prefix, and return their ids."""
        found = self.wait(self.open_transactions, "an open transaction of the prefix")
        assert isinstance(found, list)
        return found

    def batches_pass(self, count: int) -> None:
        """Wait until Spark records ``count`` more batches as done."""
        target = self.spark_committed() + count
        self.wait(lambda: self.spark_committed() >= target, f"{count} more batches")


def pause(cluster: ProcessCluster, node_id: int, hold_s: float) -> None:
    """SIGSTOP a broker for ``hold_s``, then SIGCONT it."""
    cluster.pause_node(node_id)
    try:
        time.sleep(hold_s)
    finally:
        cluster.resume_node(node_id)


def kill_and_restart(cluster: ProcessCluster, node_id: int, hold_s: float) -> None:
    """kill -9 a broker, leave it down for ``hold_s``, start it again and wait until it is back."""
    cluster.stop_node(node_id, hard=True)
    time.sleep(hold_s)
    cluster.start_node(node_id)


def kill_one(processes: list[psutil.Process], rng: random.Random) -> str:
    """kill -9 one of ``processes``, chosen by ``rng``; says which."""
    victim = rng.choice(processes)
    parent = victim.ppid()
    os.kill(victim.pid, signal.SIGKILL)
    return f"pid {victim.pid} (child of {parent})"
