"""The demo: orders -> Spark -> converted orders on real Kafka, killed -9 mid-commit, restarted,
and verified exactly once by a read_committed reader.

Steps: start an embedded Kafka (or use ``--bootstrap-servers``), produce the orders, run the
job (:mod:`kafka_eos.demo_job`) and kill it after it decided a batch but before it committed
its transactions (the worst moment: the records are written, the decision is durable, nothing
is visible), restart it, then compare input and output keys.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.table import Table

from checkpoint.crashpoints import ENV as CRASH_ENV
from connectors.kafka.client_config import LIBRDKAFKA_LOGGER
from kafka_eos.cluster import ProcessCluster
from kafka_eos.operations.drain import drain
from kafka_eos.operations.verify import VerifyReport, excess, verify_topics

console = Console()
# After batch 1's decision is durable, before its first EndTxn: kill -9 the whole job.
CRASH_AT = "driver.before_end_txn@1#1"
PARTITIONS = 3
CURRENCIES = ("EUR", "USD", "GBP", "CHF")


@dataclass(frozen=True)
class DemoRun:
    bootstrap_servers: str
    input_topic: str
    output_topic: str
    checkpoint: Path
    prefix: str
    max_offsets_per_trigger: int

    def start_job(
        self,
        crash_at: str | None,
        guarantee: str = "exactly_once",
        on_start: Callable[[int], None] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """The job in a session of its own, so that the crash kills it and only it.

        ``on_start`` gets the session id (the job's pid), e.g. to watch its memory.
        """
        env = {k: v for k, v in os.environ.items() if k != CRASH_ENV}
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        if crash_at:
            env[CRASH_ENV] = crash_at
        command = [
            sys.executable, "-m", "kafka_eos.demo_job",
            "--bootstrap-servers", self.bootstrap_servers,
            "--input", self.input_topic, "--output", self.output_topic,
            "--checkpoint", str(self.checkpoint), "--transactional-id-prefix", self.prefix,
            "--max-offsets-per-trigger", str(self.max_offsets_per_trigger),
            "--delivery-guarantee", guarantee,
        ]  # fmt: skip
        job = subprocess.Popen(
            command,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            if on_start is not None:
                on_start(job.pid)
            stdout, stderr = job.communicate()
        except BaseException:
            os.killpg(job.pid, signal.SIGKILL)  # Ctrl-C: the job goes with the demo
            job.wait()
            raise
        return subprocess.CompletedProcess(command, job.returncode, stdout, stderr)


def job_summary(result: subprocess.CompletedProcess[str]) -> dict[str, int]:
    """The job's last stdout line: batches, rows and batch durations (see demo_job)."""
    return json.loads(result.stdout.strip().splitlines()[-1])


def produce_orders(bootstrap_servers: str, topic: str, count: int) -> None:
    """Orders with unique keys (the verify contract: the pipeline keeps the key)."""
    rng = random.Random(7)
    config = {"bootstrap.servers": bootstrap_servers, "enable.idempotence": True}
    producer = Producer({**config, "logger": LIBRDKAFKA_LOGGER})
    for n in range(count):
        order = {
            "order_id": f"order-{n:07d}",
            "amount_cents": rng.randrange(100, 100_000),
            "currency": rng.choice(CURRENCIES),
        }
        producer.produce(topic, key=order["order_id"], value=json.dumps(order))
        producer.poll(0)
    if producer.flush(60):
        raise SystemExit(f"could not write the {count} demo orders to {topic}")


def create_topics(bootstrap_servers: str, *topics: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap_servers, "logger": LIBRDKAFKA_LOGGER})
    new = [NewTopic(t, num_partitions=partitions, replication_factor=1) for t in topics]
    for future in admin.create_topics(new, operation_timeout=30).values():
        future.result(timeout=60)


def run_demo(bootstrap_servers: str | None, kafka_version: str, records: int, crash: bool) -> None:
    with ExitStack() as stack:
        cluster: ProcessCluster | None = None
        if bootstrap_servers is None:
            with console.status(f"starting embedded Apache Kafka {kafka_version} (KRaft)"):
                cluster = stack.enter_context(ProcessCluster(kafka_version))
            bootstrap_servers = cluster.bootstrap_servers
            console.print(f"[green]✓[/] Kafka {kafka_version} up at {bootstrap_servers}")
        run_id = uuid.uuid4().hex[:8]
        workdir = Path(tempfile.mkdtemp(prefix="kafka-eos-demo-"))
        stack.callback(shutil.rmtree, workdir, ignore_errors=True)
        run = DemoRun(
            bootstrap_servers,
            input_topic=f"demo-orders-{run_id}",
            output_topic=f"demo-orders-eur-{run_id}",
            checkpoint=workdir / "checkpoint",
            prefix=f"kafka-eos-demo-{run_id}",
            max_offsets_per_trigger=max(1, records // 5),
        )
        create_topics(bootstrap_servers, run.input_topic, run.output_topic)
        produce_orders(bootstrap_servers, run.input_topic, records)
        console.print(
            f"[green]✓[/] {records} orders in {run.input_topic} ({PARTITIONS} partitions)"
        )

        if crash:
            _crashed_run(run)
        started = time.monotonic()
        with console.status("running the Spark job to the end of the input (local[*])"):
            result = run.start_job(crash_at=None)
        if result.returncode != 0:
            console.print(result.stderr[-4000:], markup=False, highlight=False)
            raise SystemExit(f"the demo job failed (exit {result.returncode}); its log is above")
        summary = job_summary(result)
        console.print(
            f"[green]✓[/] {'restarted job recovered and ' if crash else ''}finished in "
            f"{time.monotonic() - started:.0f} s: {summary['rows']} rows in "
            f"{summary['batches']} micro-batch(es)"
        )
        report = verify_topics(bootstrap_servers, run.input_topic, run.output_topic)
        _show(report, len(drain(bootstrap_servers, run.output_topic, "read_uncommitted")))
        if not report.exactly_once:
            raise SystemExit("exactly-once is VIOLATED: see the counts above")
        console.print(
            "[bold green]demo passed:[/] every order's result exactly once for "
            "read_committed readers"
        )
        if cluster is None:  # the user's Kafka keeps the topics: say how to check them again
            console.print(
                f"verify again: kafka-eos verify --bootstrap-servers {bootstrap_servers} "
                f"--input {run.input_topic} --output {run.output_topic} --prefix {run.prefix}",
                soft_wrap=True,
                markup=False,
            )


def _crashed_run(run: DemoRun) -> None:
    with console.status(f"running the Spark job; it will be killed -9 at {CRASH_AT}"):
        result = run.start_job(crash_at=CRASH_AT)
    if result.returncode != -signal.SIGKILL:
        console.print(result.stderr[-4000:], markup=False, highlight=False)
        raise SystemExit(f"the job was meant to be killed at {CRASH_AT}, but exited {result}")
    committed = len(drain(run.bootstrap_servers, run.output_topic))
    written = len(drain(run.bootstrap_servers, run.output_topic, "read_uncommitted"))
    console.print(
        "[yellow]✗[/] job killed -9 after deciding batch 1, before committing it: "
        f"{written} records written, {committed} visible to read_committed readers",
        soft_wrap=True,
    )


def _show(report: VerifyReport, physical: int) -> None:
    table = Table(title="kafka-eos verify (read_committed)", show_header=False)
    table.add_row("input records", str(report.inputs))
    table.add_row("output records", str(report.outputs))
    for kind in ("missing", "duplicated", "unexpected"):
        table.add_row(kind, str(sum(excess(m) for m in getattr(report, kind))))
    table.add_row("records in the log (read_uncommitted)", str(physical))
    console.print(table)
