"""Helpers for the source's integration tests: produce records, run a query, collect batches,
read a range without Spark, change a topic under the reader (delete records or the topic, add
partitions) and wait for a condition.

Keys are record numbers as text, so a test can count per key: each committed key must reach
exactly one micro-batch, and a batch Spark replays after a restart must hold the same keys.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions
from pyspark.sql.pandas.types import to_arrow_schema

from connectors.kafka.source.offset_reader import KafkaOffsetReader
from connectors.kafka.source.options import SourceOptions
from connectors.kafka.source.range_reader import read_range
from connectors.kafka.source.ranges import OffsetRange
from connectors.spark import register
from connectors.spark.source import source_schema
from integration_tests.conftest import TransactionalProducer

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from connectors.kafka.client_pool import ConsumerPool

QUERY_TIMEOUT_S = 180


@pytest.fixture
def source_spark(spark: SparkSession) -> SparkSession:
    """The session SparkSession with ``format("kafka-eos")`` registered."""
    register(spark)
    return spark


def produce(
    bootstrap: str,
    topic: str,
    keys: Iterable[int],
    *,
    partition: int = -1,
    headers: list[tuple[str, bytes | None]] | None = None,
) -> None:
    """Plain (non-transactional) records whose key and value are the record number."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for key in keys:
        text = str(key).encode()
        producer.produce(topic, key=text, value=text, partition=partition, headers=headers)
    assert producer.flush(60) == 0


def transaction(
    bootstrap: str, topic: str, keys: Iterable[int], *, commit: bool | None, partition: int = -1
) -> TransactionalProducer:
    """One transaction of ``keys``: committed, aborted, or (``commit=None``) left open.

    An open transaction's producer is returned so that the test can end it; close it with
    ``commit_transaction``/``abort_transaction`` before the test ends.
    """
    producer = TransactionalProducer(bootstrap, f"src-{uuid.uuid4().hex}")
    producer.init_transactions(30)
    producer.begin_transaction()
    for key in keys:
        text = str(key).encode()
        producer.produce(topic, key=text, value=text, partition=partition)
    assert producer.flush(30) == 0
    if commit is True:
        producer.commit_transaction(30)
    elif commit is False:
        producer.abort_transaction(30)
    return producer


class Batches:
    """A ``foreachBatch`` sink keeping each micro-batch's keys by batch id.

    Keeping by id makes a replayed batch overwrite its first attempt, the way an idempotent
    sink would; a replay that reads other records than the first attempt is a source bug and
    is recorded in ``differing_replays``. ``fail_at`` makes the sink raise in that batch
    (once), after recording it: a crash in the middle of a batch.
    """

    def __init__(self, fail_at: int | None = None) -> None:
        self.by_id: dict[int, list[int]] = {}
        self.differing_replays: list[int] = []
        self.fail_at = fail_at

    def __call__(self, frame: DataFrame, batch_id: int) -> None:
        keys = frame.selectExpr("CAST(CAST(key AS STRING) AS BIGINT) AS k").toArrow()
        self.record(batch_id, sorted(keys.column("k").to_pylist()))

    def record(self, batch_id: int, keys: list[int]) -> None:
        if batch_id in self.by_id and self.by_id[batch_id] != keys:
            self.differing_replays.append(batch_id)
        self.by_id[batch_id] = keys
        if batch_id == self.fail_at:
            self.fail_at = None
            raise RuntimeError(f"injected crash in the middle of batch {batch_id}")

    def counts(self) -> Counter[int]:
        return Counter(key for keys in self.by_id.values() for key in keys)

    def assert_exactly_once(self, expected: Iterable[int]) -> None:
        counts = self.counts()
        expected = set(expected)
        assert not self.differing_replays, f"replays read other records: {self.differing_replays}"
        assert {k for k, n in counts.items() if n > 1} == set(), "keys in several batches"
        assert expected - set(counts) == set(), "keys never delivered"
        assert set(counts) - expected == set(), "keys delivered that were not committed"


def start_stream(
    spark: SparkSession,
    options: dict[str, str],
    checkpoint: Path,
    sink: Batches,
    *,
    available_now: bool = True,
    source_format: str = "kafka-eos",
) -> StreamingQuery:
    """Start ``readStream.format(source_format)`` into ``sink`` with this checkpoint."""
    writer = (
        spark.readStream.format(source_format)
        .options(**options)
        .load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
    )
    writer = (
        writer.trigger(availableNow=True)
        if available_now
        else writer.trigger(processingTime="500 milliseconds")
    )
    return writer.start()


@contextmanager
def every_trigger_reported(spark: SparkSession) -> Iterator[None]:
    """Queries started in this block list every trigger in their progress, also those that
    run no batch (Spark reports those every 10 s by default), so that a test can count the
    triggers that saw offsets and ran nothing instead of sleeping. Spark reads the setting
    when a query starts."""
    key = "spark.sql.streaming.noDataProgressEventInterval"
    before = spark.conf.get(key)
    spark.conf.set(key, "0")
    try:
        yield
    finally:
        spark.conf.set(key, before)


def offset_total(offsets: str | None) -> int:
    """The sum of a progress report's offsets (``startOffset``, ``endOffset``,
    ``latestOffset``: the source's offset JSON), 0 for none."""
    return sum(sum(parts.values()) for parts in json.loads(offsets or "{}").values())


def run_to_end(query: StreamingQuery) -> None:
    """Wait for an AvailableNow query and re-raise its failure, if any."""
    assert query.awaitTermination(QUERY_TIMEOUT_S), "the query did not finish in time"
    error = query.exception()
    if error is not None:
        raise AssertionError(f"query failed: {error}")


def run_to_failure(query: StreamingQuery) -> str:
    """Wait for a query that must fail; return its error text."""
    from pyspark.errors import StreamingQueryException

    with pytest.raises(StreamingQueryException) as caught:
        query.awaitTermination(QUERY_TIMEOUT_S)
    return str(caught.value)


def batch_frame(spark: SparkSession, bootstrap: str, topic: str, **options: str) -> DataFrame:
    """``spark.read.format("kafka-eos")`` from earliest; a new reader each time, because
    ``DataFrameReader.options()`` changes the reader in place."""
    return spark.read.format("kafka-eos").options(**options_for(bootstrap, topic, **options)).load()


def keys_of(frame: DataFrame) -> list[int]:
    """The record numbers in a frame of Kafka rows, sorted."""
    rows = frame.selectExpr("CAST(CAST(key AS STRING) AS BIGINT) AS k").collect()
    return sorted(row.k for row in rows)


def options_for(bootstrap: str, topic: str, **extra: str) -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": bootstrap,
        "subscribe": topic,
        "startingOffsets": "earliest",
        **extra,
    }


@pytest.fixture
def checkpoint(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "checkpoint"


def latest_offsets(bootstrap: str, topic: str, isolation: str) -> dict[tuple[str, int], int]:
    """The source driver's latest offsets of ``topic`` at ``isolation``: the last stable offset
    under read_committed, the high watermark under read_uncommitted."""
    options = {"kafka.bootstrap.servers": bootstrap, "subscribe": topic}
    parsed = SourceOptions.parse({**options, "kafka.isolation.level": isolation}, streaming=True)
    reader = KafkaOffsetReader(parsed, "test-driver")
    try:
        return reader.latest(reader.partitions())
    finally:
        reader.close()


def range_batches(
    options: Mapping[str, str],
    piece: OffsetRange,
    *,
    streaming: bool = True,
    group_id: str | None = None,
    pool: ConsumerPool | None = None,
) -> Iterator[pa.RecordBatch]:
    """The Arrow batches of ``read_range`` over ``piece``, as a task reads them without Spark:
    ``options`` are the source's; a new group and the worker's pool unless given."""
    schema = to_arrow_schema(source_schema(dict(options)), timezone="UTC")
    parsed = SourceOptions.parse(dict(options), streaming=streaming)
    group = group_id or f"g-{uuid.uuid4()}"
    if pool is None:
        return read_range(piece, parsed, group, schema)
    return read_range(piece, parsed, group, schema, pool=pool)


def offsets_of(batches: Iterable[pa.RecordBatch]) -> list[int]:
    """The offsets of ``read_range``'s batches, in order."""
    return [o for batch in batches for o in batch.column("offset").to_pylist()]


def delete_records_below(bootstrap: str, topic: str, offset: int, partition: int = 0) -> int:
    """Delete the partition's records below ``offset`` (its log start moves there, as with
    retention); the low watermark the broker answers."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    [future] = admin.delete_records([TopicPartition(topic, partition, offset)]).values()
    return future.result(timeout=30).low_watermark


def delete_topic(bootstrap: str, topic: str) -> None:
    """Delete ``topic``; the broker completes the deletion asynchronously."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_topics([topic]).values():
        future.result(timeout=30)


def add_partitions(bootstrap: str, topic: str, count: int) -> None:
    """Grow ``topic`` to ``count`` partitions and wait until the broker's metadata shows them:
    a record sent to a partition its producer does not know yet fails."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_partitions([NewPartitions(topic, count)]).values():
        future.result(timeout=30)
    deadline = time.monotonic() + 30
    while len(admin.list_topics(topic, timeout=10).topics[topic].partitions) < count:
        assert time.monotonic() < deadline, f"{topic} never showed {count} partitions"
        time.sleep(0.2)


def wait_until(
    condition: Callable[[], object],
    failure: str | Callable[[], str],
    *,
    query: StreamingQuery | None = None,
    interval_s: float = 0.2,
) -> None:
    """Poll ``condition`` every ``interval_s`` for up to ``QUERY_TIMEOUT_S``; fail with
    ``failure`` (a text, or a function giving it when the time is up). With ``query``, fail
    at once if the query has failed."""
    deadline = time.monotonic() + QUERY_TIMEOUT_S
    while not condition():
        if query is not None:
            error = query.exception()
            assert error is None, f"query failed: {error}"
        assert time.monotonic() < deadline, failure if isinstance(failure, str) else failure()
        time.sleep(interval_s)
