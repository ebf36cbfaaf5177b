"""Recovery after a driver kill, for ``kafka-eos bench --suite contenders``: a Spark contender
runs until its first micro-batch is committed, its driver is killed (SIGKILL to the whole job,
JVM and Python workers) a second into the next batch, and the same query restarts on the same
checkpoint. What a user waits for and what a read_committed reader then sees.

The recovery time runs from the kill to the end of the restarted query's first micro-batch:
a new JVM and Spark session, the sink's recovery (our sink commits a decided batch, aborts the
killed batch's lingering transactions), then the replay of the batch the kill cut short.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections import Counter
from dataclasses import dataclass

from kafka_eos.bench.job import PARTITIONS, Input, SparkContender, job_command
from kafka_eos.bench.pipeline import run_measured
from kafka_eos.demo import create_topics
from kafka_eos.operations.drain import drain

KILL_INTO_BATCH_S = 1.0  # after batch 1's commit: batch 2's tasks are writing by then


@dataclass(frozen=True)
class Recovery:
    contender: str
    records: int
    recovery_s: float  # from the kill to the end of the restarted query's first micro-batch
    output_rows: int  # read_committed, after the restarted query finished
    duplicates: int  # input records seen more than once
    lost: int  # input records never seen

    def summary(self) -> str:
        return (
            f"{self.recovery_s:.1f} s to the first batch after the kill; read_committed: "
            f"{self.duplicates:,} duplicates, {self.lost:,} lost of {self.records:,}"
        )


def measure_recovery(contender: SparkContender, given: Input, timeout_s: float = 900) -> Recovery:
    output = f"bench-recover-{uuid.uuid4().hex[:8]}"
    create_topics(given.bootstrap, output, partitions=PARTITIONS)
    checkpoint = given.workdir / output
    command = job_command(contender, given, output, checkpoint)
    killed_at = _kill_in_second_batch(
        command, checkpoint / "commits" / "1", contender.name, timeout_s
    )
    summary, _ = run_measured(command, f"{contender.name} (restarted)", timeout_s=timeout_s)
    if summary["first_batch_ended_s"] is None:
        raise SystemExit(f"{contender.name}: the restarted query ran no micro-batch")
    seen = Counter(r.key for r in drain(given.bootstrap, output, "read_committed", timeout_s=300))
    expected = {b"k%011d" % n for n in range(given.records)}
    return Recovery(
        contender.name,
        given.records,
        summary["first_batch_ended_s"] - killed_at,
        sum(seen.values()),
        sum(count - 1 for count in seen.values()),
        len(expected - seen.keys()),
    )


def _kill_in_second_batch(
    command: list[str], committed: os.PathLike, what: str, timeout_s: float
) -> float:
    """Starts the job, kills it all ``KILL_INTO_BATCH_S`` after batch 1 is committed: the time
    of the kill."""
    job = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        deadline = time.monotonic() + timeout_s
        while not os.path.exists(committed):
            if job.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"{what} ended or stalled before its second batch: no kill")
            time.sleep(0.05)
        time.sleep(KILL_INTO_BATCH_S)
        if job.poll() is not None:
            raise SystemExit(f"{what} finished before the kill: give it more records")
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
        killed_at = time.time()
        job.wait()
    return killed_at
