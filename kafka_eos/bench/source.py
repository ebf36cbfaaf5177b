"""The source benchmark: what a task and a trigger cost, side by side in one run.

- **Per task**: a worker's tasks are range reads (``read_range``, the function each Spark task
  runs), here a stream's tasks on one partition: 100 records are produced, then read, and
  again; only the reads are timed. And the pieces of a batch read of one partition, read in
  order by one worker, over plaintext. A consumer per task (how the source read before consumers
  were pooled) against the worker's pooled consumer, over plaintext and over TLS. The time
  includes the consumer's close, which waits for a fetch in flight.
- **Per trigger**: the driver's questions of one trigger (the partitions of the subscription,
  then their latest offsets) for a subscription of 100 topics by name, against the same
  questions with the topics' metadata asked one topic per request (how the source asked
  before). A pattern was, and is, one listing of the cluster per trigger.

Runs alternate (one way, then the other, ``repeats`` times) so that drift hits both; the
tables give medians and ratios.
"""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass

from confluent_kafka import Producer
from rich.console import Console

from connectors.kafka.client_pool import ConsumerPool
from connectors.kafka.source.client import open_consumer
from connectors.kafka.source.offset_reader import KafkaOffsetReader
from connectors.kafka.source.options import SourceOptions
from connectors.kafka.source.range_reader import read_range
from connectors.kafka.source.ranges import OffsetRange
from connectors.spark.compat import arrow_schema
from connectors.spark.source import source_schema
from kafka_eos.bench.pipeline import report_header
from kafka_eos.cluster import ProcessCluster
from kafka_eos.demo import create_topics

console = Console()
TASK_RECORDS = 100
TOPICS = 100
# What each Spark task of the source gets: the row schema without headers, in Arrow.
_SCHEMA = arrow_schema(source_schema({}))


@dataclass(frozen=True)
class Row:
    """One line of a table: what was measured, both ways, in ms (medians)."""

    what: str
    before: float
    after: float


def run_source_bench(kafka_version: str, tasks: int, triggers: int, repeats: int) -> list[Row]:
    with ExitStack() as stack:
        with console.status(f"starting embedded Apache Kafka {kafka_version} with TLS"):
            cluster = stack.enter_context(ProcessCluster(kafka_version, tls=True))
        bootstrap = cluster.bootstrap_servers
        run_id = uuid.uuid4().hex[:8]
        tasks_topic = f"bench-tasks-{run_id}"
        topics = [f"bench-trigger-{run_id}-{i:03d}" for i in range(TOPICS)]
        create_topics(bootstrap, tasks_topic, *topics, partitions=1)
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1})
        tls = {
            "kafka.bootstrap.servers": cluster.tls_bootstrap_servers,
            "kafka.security.protocol": "SSL",
            "kafka.ssl.ca.location": cluster.tls_ca_location,
        }
        rows = []
        for name, connection in (
            ("plaintext", {"kafka.bootstrap.servers": bootstrap}),
            ("TLS", tls),
        ):
            with console.status(f"{tasks} tasks over {name}"):
                before, after = _alternate(
                    repeats,
                    lambda c=connection: _tasks(
                        c, tasks_topic, producer, tasks, ConsumerPool(capacity=0)
                    ),
                    lambda c=connection: _tasks(c, tasks_topic, producer, tasks, ConsumerPool()),
                )
            rows.append(Row(f"stream task of {TASK_RECORDS} records, {name}", before, after))
        batch_topic = f"bench-batch-{run_id}"
        create_topics(bootstrap, batch_topic, partitions=1)
        _produce(producer, batch_topic, tasks * TASK_RECORDS)
        plaintext = {"kafka.bootstrap.servers": bootstrap}
        with console.status(f"{tasks} pieces of a batch read"):
            before, after = _alternate(
                repeats,
                lambda: _pieces(plaintext, batch_topic, tasks, ConsumerPool(capacity=0)),
                lambda: _pieces(plaintext, batch_topic, tasks, ConsumerPool()),
            )
        rows.append(Row(f"batch piece of {TASK_RECORDS} records, plaintext", before, after))
        options = {"kafka.bootstrap.servers": bootstrap, "subscribe": ",".join(topics)}
        with console.status(f"{triggers} triggers, {TOPICS} topics"):
            before, after = _alternate(
                repeats,
                lambda: _triggers(options, triggers, one_per_topic=True),
                lambda: _triggers(options, triggers, one_per_topic=False),
            )
        rows.append(Row(f"trigger, `subscribe` of {TOPICS} topics", before, after))
        return rows


def _alternate(
    repeats: int, before: Callable[[], list[float]], after: Callable[[], list[float]]
) -> tuple[float, float]:
    """Medians in ms of each way's samples over ``repeats`` alternating runs."""
    samples: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeats):
        samples[0].extend(before())
        samples[1].extend(after())
    return statistics.median(samples[0]) * 1000, statistics.median(samples[1]) * 1000


def _tasks(
    connection: dict[str, str], topic: str, producer: Producer, tasks: int, pool: ConsumerPool
) -> list[float]:
    """The time of each of ``tasks`` range reads of a stream's partition: each reads the
    records produced since the one before, as each micro-batch's task does."""
    options = SourceOptions.parse({**connection, "subscribe": topic}, streaming=True)
    group = f"bench-{uuid.uuid4().hex[:8]}-executor"
    end = _log_end(producer, topic)
    times = []
    try:
        for _ in range(tasks):
            start, end = end, _produce(producer, topic, TASK_RECORDS)
            times.append(_timed_read(OffsetRange(topic, 0, start, end), options, group, pool))
    finally:
        pool.close()
    return times


def _pieces(connection: dict[str, str], topic: str, tasks: int, pool: ConsumerPool) -> list[float]:
    """The time of each of ``tasks`` pieces of a batch read of one partition that holds just
    them, read in order: the worst case for a pooled consumer, whose fetcher reaches the log
    end at once and waits there (``fetch.wait.max.ms``) before the next piece's fetch."""
    options = SourceOptions.parse({**connection, "subscribe": topic}, streaming=False)
    group = f"bench-{uuid.uuid4().hex[:8]}-executor"
    times = []
    try:
        for task in range(tasks):
            piece = OffsetRange(topic, 0, task * TASK_RECORDS, (task + 1) * TASK_RECORDS)
            times.append(_timed_read(piece, options, group, pool))
    finally:
        pool.close()
    return times


def _timed_read(
    piece: OffsetRange, options: SourceOptions, group: str, pool: ConsumerPool
) -> float:
    """How long one task's ``read_range`` of ``piece`` took; it must read every record."""
    began = time.perf_counter()
    rows = sum(b.num_rows for b in read_range(piece, options, group, _SCHEMA, pool=pool))
    took = time.perf_counter() - began
    if rows != TASK_RECORDS:
        raise SystemExit(f"a task read {rows} records of {piece}, not {TASK_RECORDS}")
    return took


def _triggers(options: dict[str, str], triggers: int, *, one_per_topic: bool) -> list[float]:
    """The time of each trigger's questions: the partitions, then their latest offsets."""
    parsed = SourceOptions.parse(options, streaming=True)
    reader = KafkaOffsetReader(parsed, "bench-driver")
    by_name = open_consumer(parsed, "bench-driver")
    times = []
    try:
        reader.latest(reader.partitions())  # connections up, as in a running query
        for _ in range(triggers):
            start = time.perf_counter()
            if one_per_topic:
                keys = [
                    (name, partition)
                    for name in parsed.subscription.topics
                    for partition in by_name.list_topics(name).topics[name].partitions
                ]
            else:
                keys = reader.partitions()
            latest = reader.latest(keys)
            times.append(time.perf_counter() - start)
            if len(latest) != TOPICS:
                raise SystemExit(f"a trigger found {len(latest)} partitions, not {TOPICS}")
    finally:
        by_name.close()
        reader.close()
    return times


def _produce(producer: Producer, topic: str, records: int) -> int:
    """Produce ``records`` to partition 0 and wait for them: the log end after them."""
    ends: list[int] = []
    for n in range(records):
        producer.produce(
            topic,
            value=b"x" * 100,
            key=str(n).encode(),
            partition=0,
            on_delivery=lambda err, msg: ends.append(-1 if err else msg.offset() + 1),
        )
    producer.flush()
    if len(ends) != records or min(ends) < 0:
        raise SystemExit(f"producing to {topic} failed")
    return max(ends)


def _log_end(producer: Producer, topic: str) -> int:
    return _produce(producer, topic, 1)


def render(rows: list[Row], command: str, kafka: str, tasks: int, triggers: int) -> str:
    """The Markdown section of docs/benchmarks.md."""
    lines = [
        *report_header(
            "Source: what a task and a trigger cost", "kafka-eos bench --suite source", command
        ),
        f"- Kafka {kafka} (one KRaft node, local process, a plaintext and a TLS listener)",
        f"- task: `read_range`, what each Spark task of the source runs, on one partition of a "
        f"stream: {tasks} times, {TASK_RECORDS} records of 100 B are produced, then read; "
        "before: a new consumer per task (with the range reader's settings), closed at its "
        "end; after: the worker's pooled "
        "consumer; batch piece: the same over a partition that holds just the pieces",
        f"- trigger: the driver's questions of one trigger (partitions, then latest offsets), "
        f"{triggers} triggers, {TOPICS} topics of one partition; before: metadata asked one topic "
        "per request; after: one request for all (`describe_topics`)",
        "- medians of every sample of the alternating runs",
        "",
        "| what | before (ms) | after (ms) | after vs before |",
        "| --- | ---: | ---: | ---: |",
    ]
    for row in rows:
        lines.append(
            f"| {row.what} | {row.before:,.1f} | {row.after:,.1f} | {row.after / row.before:.2f}x |"
        )
    return "\n".join(lines) + "\n"
