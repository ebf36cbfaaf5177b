"""The demo pipeline: Spark streaming -> output topic, verified by a read_committed reader."""

from __future__ import annotations

import os
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack

from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console

from connectors.kafka.drain import drain
from kafka_eos.cluster import ProcessCluster

console = Console()


def run_demo(bootstrap_servers: str | None, kafka_version: str, records: int) -> None:
    with ExitStack() as stack:
        if bootstrap_servers is None:
            with console.status(f"starting embedded Apache Kafka {kafka_version} (KRaft)"):
                cluster = stack.enter_context(ProcessCluster(kafka_version))
            bootstrap_servers = cluster.bootstrap_servers
            console.print(f"[green]✓[/] Kafka {kafka_version} up at {bootstrap_servers}")
        sink = f"demo-output-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": bootstrap_servers})
        for future in admin.create_topics([NewTopic(sink, num_partitions=2)]).values():
            future.result(timeout=60)

        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        from kafka_eos.spark_job import run_squares_job

        started = time.monotonic()
        with console.status("running the Spark streaming job (local[*])"):
            checkpoint = stack.enter_context(tempfile.TemporaryDirectory(prefix="kafka-eos-demo-"))
            batches = run_squares_job(bootstrap_servers, sink, checkpoint, records)
        console.print(
            f"[green]✓[/] Spark job squared every value in {batches} micro-batch(es) "
            f"in {time.monotonic() - started:.1f} s"
        )
        seen = drain(bootstrap_servers, sink, "read_committed")
        values = sorted(int(r.value or b"0") for r in seen)
        expected = sorted(n * n for n in range(records))
        missing = len(set(expected) - set(values))
        duplicates = len(values) - len(set(values))
        console.print(
            f"read_committed reader of {sink}: {len(values)} records, "
            f"{duplicates} duplicate(s), {missing} missing"
        )
        if values != expected:
            raise SystemExit("demo output differs from the expected squares")
        console.print("[bold green]demo passed[/]")
