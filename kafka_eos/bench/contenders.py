"""``kafka-eos bench --suite contenders``: our pipeline beside Spark's built-in one, the mixed
pairs, a Python sink that drops its rows, a plain confluent-kafka loop, Quix Streams and PyFlink,
on one local Kafka, the same input, the same trigger (``flink`` and ``quix``: the contenders
that are not Spark, each run in its own virtualenv by ``peer_venv``, their jobs in ``peers/``).

Every Spark contender is a fresh process (``kafka_eos.bench.job``), as a user's job would be:
Spark ``local[2]``, ``maxOffsetsPerTrigger``, ``Trigger.AvailableNow``, an identity
``selectExpr("key", "value")``. Its rows/s are the input rows over the summed
``triggerExecution`` time of its micro-batches (the JVM's start excluded). Runs are
interleaved (every contender once, then again) so that drift on the machine hits all alike.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
import uuid
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from rich.console import Console

from checkpoint.store import SnapshotStore
from connectors.kafka.sink.options import decision_location
from kafka_eos.bench.flink import flink_run
from kafka_eos.bench.job import PARTITIONS, Input, Measured, SparkContender, job_command
from kafka_eos.bench.latency import Latency, measure_latency
from kafka_eos.bench.pipeline import run_measured
from kafka_eos.bench.quix import quix_run
from kafka_eos.bench.recovery import Recovery, measure_recovery
from kafka_eos.cluster import ProcessCluster
from kafka_eos.demo import create_topics
from kafka_eos.operations.drain import drain

console = Console()
SPARK_BUILT_IN = "Spark `kafka` -> Spark `kafka` (at-least-once)"
OURS_EXACTLY_ONCE = "`kafka-eos` -> `kafka-eos` exactly_once"
OURS_AT_LEAST_ONCE = "`kafka-eos` -> `kafka-eos` at_least_once"
OUR_SINK = "Spark `kafka` -> `kafka-eos` exactly_once"
PLAIN_LOOP = "confluent-kafka consume -> transactional produce, one process"
QUIX = "Quix Streams 3.28 exactly-once, one process"
FLINK = "PyFlink 2.3 `KafkaSink` EXACTLY_ONCE, checkpoint every 2 s, parallelism 2"
PYTHON_SINK_CEILING = "Spark `kafka` -> a Python sink that drops its rows"
TENTH = f"{OURS_EXACTLY_ONCE}, a tenth of the records"


@dataclass(frozen=True)
class ProcessContender:
    """A pipeline outside Spark: one process that copies the input to the output topic."""

    name: str
    run: Callable[[Input, str], Measured]


Contender = SparkContender | ProcessContender


def produce_input(bootstrap: str, topic: str, records: int, size: int) -> None:
    """Unique 12-byte keys and values that fill each record to ``size`` bytes."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20})
    value = b"v" * max(size - 12, 0)
    batch = 10_000
    for start in range(0, records, batch):
        messages = [
            {"key": b"k%011d" % n, "value": value}
            for n in range(start, min(start + batch, records))
        ]
        _produce_batch(producer, topic, messages)
    if producer.flush(120):
        raise SystemExit(f"could not write the input to {topic}")


def _produce_batch(producer: Producer, topic: str, messages: list[dict[str, object]]) -> None:
    """All of ``messages``, in order: a full queue refuses a tail, queued again once it drained."""
    while messages:
        queued = producer.produce_batch(topic, messages)
        messages = [m for m in messages[queued:] if m.pop("_error", True)]
        producer.poll(0.05 if messages else 0)


def plain_loop(given: Input, output: str) -> Measured:
    """The Python ceiling: consume, produce in batches, commit a transaction (with the
    consumed offsets) every ``per_transaction`` records; one process, no Spark."""
    bootstrap, topic, per_transaction = given.bootstrap, given.topic, given.max_offsets
    group = f"bench-loop-{uuid.uuid4().hex[:6]}"
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": group, "linger.ms": 5})
    producer.init_transactions(30)
    partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
    ends = {
        p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
        for p in partitions
    }
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    total, in_transaction, positions = sum(ends.values()), 0, dict.fromkeys(partitions, 0)
    started = time.perf_counter()
    producer.begin_transaction()
    done = 0
    while done < total:
        messages = [m for m in consumer.consume(10_000, timeout=1.0) if m.error() is None]
        for m in messages:
            positions[m.partition()] = m.offset() + 1
        _produce_batch(producer, output, [{"key": m.key(), "value": m.value()} for m in messages])
        done += len(messages)
        in_transaction += len(messages)
        if in_transaction >= per_transaction or done >= total:
            offsets = [TopicPartition(topic, p, o) for p, o in positions.items()]
            producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 30)
            producer.commit_transaction(60)
            in_transaction = 0
            if done < total:
                producer.begin_transaction()
    seconds = time.perf_counter() - started
    consumer.close()
    return Measured(done, seconds, 0)  # its memory is the bench's own: not sampled


CONTENDERS: tuple[Contender, ...] = (
    SparkContender(SPARK_BUILT_IN, "kafka", "kafka"),
    SparkContender(OURS_EXACTLY_ONCE, "kafka-eos", "kafka-eos"),
    SparkContender(OURS_AT_LEAST_ONCE, "kafka-eos", "kafka-eos", "at_least_once"),
    SparkContender("`kafka-eos` -> Spark `kafka`", "kafka-eos", "kafka"),
    SparkContender(OUR_SINK, "kafka", "kafka-eos"),
    SparkContender(PYTHON_SINK_CEILING, "kafka", "discard"),
    ProcessContender(PLAIN_LOOP, plain_loop),
    ProcessContender(QUIX, quix_run),
    ProcessContender(FLINK, flink_run),
)


@dataclass(frozen=True)
class Run:
    contender: str
    record_bytes: int
    rows: int
    seconds: float
    python_worker_rss: int  # the largest Python worker's peak RSS; 0 without Spark
    commit_ms: tuple[int, ...]  # per batch: decision to confirmation (our exactly_once sink)
    transactions_per_commit: tuple[int, ...]
    output_rows: int | None  # read_committed count of the output, where it was checked

    @property
    def rows_per_s(self) -> float:
        return self.rows / max(self.seconds, 1e-3)

    @property
    def mb_per_s(self) -> float:
        return self.rows_per_s * self.record_bytes / 1e6


@dataclass(frozen=True)
class Results:
    runs: list[Run]
    latencies: list[Latency]
    recoveries: list[Recovery]


def run_contenders(
    kafka_version: str,
    records: int,
    sizes: Sequence[int],
    repeats: int,
    max_offsets_per_trigger: int,
    workdir: Path,
    contenders: Sequence[Contender] = CONTENDERS,
) -> Results:
    runs: list[Run] = []
    with ExitStack() as stack:
        with console.status(f"starting embedded Apache Kafka {kafka_version} (KRaft)"):
            cluster = stack.enter_context(ProcessCluster(kafka_version, heap="-Xmx1g"))
        bootstrap = cluster.bootstrap_servers
        for size in sizes:
            given = _input(bootstrap, records, size, max_offsets_per_trigger, workdir)
            for repeat in range(repeats):
                for contender in contenders:
                    checked = repeat == repeats - 1  # read the output back once per contender
                    with console.status(f"{size} B, run {repeat + 1}/{repeats}: {contender.name}"):
                        run = _run(contender, given, checked)
                    runs.append(run)
                    console.print(
                        f"  {size:>5} B  {contender.name:<58} {run.rows_per_s:>9,.0f} rows/s",
                        markup=False,
                    )
        # The Python workers' memory at a tenth of the records: flat, or growing with them.
        small = max(records // 10, max_offsets_per_trigger)
        given = _input(bootstrap, small, sizes[0], max_offsets_per_trigger, workdir)
        ours = next(c for c in contenders if c.name == OURS_EXACTLY_ONCE)
        with console.status(f"{small:,} records: {ours.name}"):
            runs.append(_run(dataclasses.replace(ours, name=TENTH), given, False))
        spark = [c for c in contenders if isinstance(c, SparkContender)]
        latencies, recoveries = [], []
        for contender in spark:
            if contender.name not in (SPARK_BUILT_IN, OURS_EXACTLY_ONCE):
                continue
            with console.status(f"latency: {contender.name}"):
                latency = measure_latency(contender, bootstrap, workdir)
            latencies.append(latency)
            p50, p99 = latency.percentile(0.5), latency.percentile(0.99)
            console.print(f"  latency {contender.name}: p50 {p50:,.0f} ms, p99 {p99:,.0f} ms")
            given = _input(bootstrap, records, sizes[0], max_offsets_per_trigger, workdir)
            with console.status(f"recovery after a driver kill: {contender.name}"):
                recovery = measure_recovery(contender, given)
            recoveries.append(recovery)
            console.print(f"  recovery {contender.name}: {recovery.summary()}")
    return Results(runs, latencies, recoveries)


def _input(bootstrap: str, records: int, size: int, max_offsets: int, workdir: Path) -> Input:
    topic = f"bench-in-{size}-{uuid.uuid4().hex[:6]}"
    create_topics(bootstrap, topic, partitions=PARTITIONS)
    with console.status(f"producing {records:,} records of {size} B"):
        produce_input(bootstrap, topic, records, size)
    return Input(bootstrap, topic, records, size, max_offsets, workdir)


def _run(contender: Contender, given: Input, checked: bool) -> Run:
    output = f"bench-out-{uuid.uuid4().hex[:8]}"
    create_topics(given.bootstrap, output, partitions=PARTITIONS)
    commits: tuple[tuple[int, ...], tuple[int, ...]] = ((), ())
    if isinstance(contender, ProcessContender):
        measured = contender.run(given, output)
    else:
        checkpoint = given.workdir / output
        measured = _spark_job(contender, given, output, checkpoint)
        if contender.sink == "kafka-eos":
            commits = _commits(checkpoint)
    counted = None
    if checked and (isinstance(contender, ProcessContender) or contender.writes):
        counted = len(drain(given.bootstrap, output, "read_committed", timeout_s=300))
    return Run(
        contender.name, given.record_bytes, measured.rows, measured.seconds, measured.rss,
        *commits, counted,
    )  # fmt: skip


def _spark_job(contender: SparkContender, given: Input, output: str, checkpoint: Path) -> Measured:
    command = job_command(contender, given, output, checkpoint)
    summary, memory = run_measured(command, contender.name)
    seconds = summary["trigger_ms"] / 1000
    return Measured(summary["rows"], seconds, memory.peak_python_worker_bytes)


def _commits(checkpoint: Path) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Per decided batch: decision to confirmation (the EndTxn of every transaction), and
    how many transactions the decision named, from the sink's own decision store."""
    store = SnapshotStore(decision_location(str(checkpoint)))
    latencies, counts = [], []
    for cid in store.checkpoint_ids():
        snapshot, confirmation = store.get(cid), store.confirmation(cid)
        if snapshot and confirmation and snapshot.decided_at_ms and confirmation.confirmed_at_ms:
            latencies.append(confirmation.confirmed_at_ms - snapshot.decided_at_ms)
            counts.append(len(snapshot.committables))
    return tuple(latencies), tuple(counts)


def medians(runs: Sequence[Run], size: int) -> dict[str, Run]:
    """Per contender, the run with the median rows/s at ``size`` (a real run, not a blend)."""
    result = {}
    names = (r.contender for r in runs if r.record_bytes == size and r.contender != TENTH)
    for name in dict.fromkeys(names):
        ranked = sorted(
            (r for r in runs if r.contender == name and r.record_bytes == size),
            key=lambda r: r.rows_per_s,
        )
        result[name] = ranked[(len(ranked) - 1) // 2]
    return result


def all_commits(runs: Sequence[Run], name: str) -> list[int]:
    return [ms for r in runs if r.contender == name for ms in r.commit_ms]


def median_of(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")
