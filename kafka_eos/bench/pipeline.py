"""The benchmark: the demo's Kafka -> Spark -> Kafka job under each delivery guarantee, side by
side in one run, on the same input, with throughput ratios and peak memory.

What it measures: the rows per second of the micro-batches (Spark's ``triggerExecution``
time, so the JVM start is left out) and the peak resident memory of the whole job (driver,
JVM and Python workers, summed over the job's processes). Runs are interleaved
(none, at_least_once, exactly_once, none, ...) so that drift on the machine hits all three.
"""

from __future__ import annotations

import json
import os
import platform
import signal
import statistics
import subprocess
import threading
import time
import uuid
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from subprocess import PIPE
from typing import Any

import psutil
from rich.console import Console
from rich.table import Table

from kafka_eos.cluster import ProcessCluster
from kafka_eos.demo import DemoRun, create_topics, job_summary, produce_orders
from kafka_eos.operations.verify import verify_topics

console = Console()
GUARANTEES = ("none", "at_least_once", "exactly_once")


@dataclass(frozen=True)
class Measurement:
    guarantee: str
    rows: int
    batches: int
    trigger_ms: int
    peak_rss_bytes: int
    exactly_once: bool  # what a read_committed reader of this run's output saw

    @property
    def rows_per_s(self) -> float:
        return self.rows / max(self.trigger_ms, 1) * 1000


class PeakMemory:
    """Samples the summed RSS of every process in a session (the job's process group), and
    the RSS of its largest Python worker (PySpark's ``pyspark.daemon`` and its forks)."""

    def __init__(self, session_id: int, interval_s: float = 0.25) -> None:
        self._session_id = session_id
        self._interval_s = interval_s
        self._stop = threading.Event()
        self.peak_bytes = 0
        self.peak_python_worker_bytes = 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            total = 0
            for process in psutil.process_iter():
                try:
                    if os.getsid(process.pid) != self._session_id:
                        continue
                    rss = process.memory_info().rss
                    total += rss
                    if "pyspark.daemon" in process.cmdline():
                        self.peak_python_worker_bytes = max(self.peak_python_worker_bytes, rss)
                except (psutil.Error, ProcessLookupError, PermissionError):
                    continue  # gone between the listing and the read
            self.peak_bytes = max(self.peak_bytes, total)


def run_measured(
    command: list[str], what: str, cwd: Path | None = None, timeout_s: float = 3600
) -> tuple[dict[str, Any], PeakMemory]:
    """Runs a job in its own session, sampling its memory: the JSON summary it prints last.
    A job that fails, or outlives ``timeout_s``, ends the bench with its stderr's tail."""
    job = subprocess.Popen(
        command, cwd=cwd, stdout=PIPE, stderr=PIPE, text=True, start_new_session=True
    )
    memory = PeakMemory(job.pid)
    memory.start()
    try:
        stdout, stderr = job.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
        raise SystemExit(f"{what} ran longer than {timeout_s:.0f} s: stopped") from None
    finally:
        memory.stop()
    if job.returncode != 0:
        raise SystemExit(f"{what} failed (exit {job.returncode}):\n{stderr[-4000:]}")
    return json.loads(stdout.strip().splitlines()[-1]), memory


def run_bench(
    bootstrap_servers: str | None,
    kafka_version: str,
    records: int,
    batches: int,
    repeats: int,
    workdir: Path,
) -> list[Measurement]:
    with ExitStack() as stack:
        if bootstrap_servers is None:
            with console.status(f"starting embedded Apache Kafka {kafka_version} (KRaft)"):
                cluster = stack.enter_context(ProcessCluster(kafka_version))
            bootstrap_servers = cluster.bootstrap_servers
        run_id = uuid.uuid4().hex[:8]
        input_topic = f"bench-orders-{run_id}"
        create_topics(bootstrap_servers, input_topic)
        with console.status(f"producing {records} orders"):
            produce_orders(bootstrap_servers, input_topic, records)
        measurements = []
        for repeat in range(repeats):
            for guarantee in GUARANTEES:
                name = f"{run_id}-{guarantee.replace('_', '-')}-{repeat}"
                run = DemoRun(
                    bootstrap_servers,
                    input_topic=input_topic,
                    output_topic=f"bench-out-{name}",
                    checkpoint=workdir / name,
                    prefix=f"kafka-eos-bench-{name}",
                    max_offsets_per_trigger=-(-records // batches),
                )
                create_topics(bootstrap_servers, run.output_topic)
                with console.status(f"run {repeat + 1}/{repeats}: {guarantee}"):
                    measurements.append(_measure(run, guarantee))
                console.print(f"  {guarantee:<14} {measurements[-1].rows_per_s:>10,.0f} rows/s")
        return measurements


def _measure(run: DemoRun, guarantee: str) -> Measurement:
    samplers: list[PeakMemory] = []

    def sample(session_id: int) -> None:
        samplers.append(PeakMemory(session_id))
        samplers[0].start()

    try:
        result = run.start_job(crash_at=None, guarantee=guarantee, on_start=sample)
    finally:
        for sampler in samplers:
            sampler.stop()
    if result.returncode != 0:
        console.print(result.stderr[-4000:], markup=False, highlight=False)
        raise SystemExit(f"the {guarantee} run failed (exit {result.returncode})")
    summary = job_summary(result)
    report = verify_topics(run.bootstrap_servers, run.input_topic, run.output_topic)
    return Measurement(
        guarantee,
        summary["rows"],
        summary["batches"],
        summary["trigger_ms"],
        samplers[0].peak_bytes,
        report.exactly_once,
    )


def render(
    measurements: list[Measurement], command: str, records: int, batches: int, kafka: str
) -> str:
    """The section of docs/benchmarks.md: the exact command, the machine, medians, ratios."""
    by_guarantee = {
        g: [m for m in measurements if m.guarantee == g]
        for g in GUARANTEES
        if any(m.guarantee == g for m in measurements)
    }
    median_rate = {g: statistics.median(m.rows_per_s for m in ms) for g, ms in by_guarantee.items()}
    median_rss = {
        g: statistics.median(m.peak_rss_bytes for m in ms) for g, ms in by_guarantee.items()
    }
    base_rate, base_rss = median_rate["none"], median_rss["none"]
    lines = [
        *report_header("Pipeline: each delivery guarantee", "kafka-eos bench", command),
        f"- Kafka {kafka} (one KRaft node, local process); Spark `local[*]`",
        f"- job: the demo pipeline (orders -> parse, convert to EUR -> Kafka), {records} records "
        f"in {batches} micro-batches, 3 input and 3 output partitions; "
        f"{len(measurements) // len(by_guarantee)} interleaved run(s) per guarantee, medians",
        "- rows/s: input rows over the summed `triggerExecution` time of the micro-batches "
        "(JVM start-up excluded); peak RSS: the job's processes (driver, JVM, Python workers) "
        "summed, sampled every 0.25 s",
        "",
        "| deliveryGuarantee | rows/s | vs none | peak RSS (MiB) | vs none | exactly once seen |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for guarantee, ms in by_guarantee.items():
        lines.append(
            f"| `{guarantee}` | {median_rate[guarantee]:,.0f} "
            f"| {median_rate[guarantee] / base_rate:.2f}x "
            f"| {median_rss[guarantee] / 2**20:,.0f} "
            f"| {median_rss[guarantee] / base_rss:.2f}x "
            f"| {'yes' if all(m.exactly_once for m in ms) else 'NO'} |"
        )
    eo, alo = median_rate.get("exactly_once"), median_rate.get("at_least_once")
    if eo and alo:
        lines += [
            "",
            f"exactly_once runs at {eo / alo:.2f}x the throughput of at_least_once "
            f'({eo / base_rate:.2f}x of none). "exactly once seen" is a read_committed '
            "verify of each run's output against the input (no failure is injected here; "
            "`make test` covers failures).",
        ]
    return "\n".join(lines) + "\n"


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (nearest rank); 0 when there are none."""
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]) if ordered else 0.0


def report_header(title: str, written_by: str, command: str) -> list[str]:
    """A report section's first lines: its title, the exact command, the date and machine."""
    return [
        f"## {title}",
        "",
        f"Written by `{written_by}`; regenerate with:",
        "",
        "```",
        command,
        "```",
        "",
        f"- date: {time.strftime('%Y-%m-%d %H:%M %Z')}",
        f"- machine: {platform.machine()}, {os.cpu_count()} cores, "
        f"{psutil.virtual_memory().total / 2**30:.0f} GiB, Python {platform.python_version()}",
    ]


def show(measurements: list[Measurement]) -> None:
    table = Table(title="kafka-eos bench")
    for column in ("guarantee", "rows", "batches", "rows/s", "peak RSS MiB", "exactly once"):
        table.add_column(column)
    for m in measurements:
        table.add_row(
            m.guarantee,
            str(m.rows),
            str(m.batches),
            f"{m.rows_per_s:,.0f}",
            f"{m.peak_rss_bytes / 2**20:,.0f}",
            "yes" if m.exactly_once else "NO",
        )
    console.print(table)
