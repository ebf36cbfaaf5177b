"""The same options through Spark's ``format("kafka")`` and ``format("kafka-eos")``, on the
same topics, compared row for row and column for column (issue 14, item 3).

Spark's own connector is its 4.2.0 release from Maven Central (``make spark-kafka-jars``),
loaded into the session's SparkSession through ``spark.jars``: one driver for the whole
suite, which kills nothing. Where kafka-eos differs on purpose, the test asserts the
difference as ``docs/source.md`` and ``docs/sink.md`` list it; everywhere else the rows must be
equal, every column: key, value, topic, partition, offset, timestamp, timestampType, headers.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from pyspark.sql import DataFrame, SparkSession

from connectors.spark.compat import ADMISSION_CONTROL
from integration_tests import available_now
from integration_tests.conftest import create_topic
from kafka_eos.cluster import KafkaCluster
from kafka_eos.operations.drain import drain

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

FORMATS = ("kafka", "kafka-eos")
# Record i of the plain topic has timestamp BASE_MS + i s: recent, or retention (7 days by
# the record's own timestamp) would delete the records while the suite runs.
BASE_MS = int(time.time() * 1000) - 3_600_000
PLAIN_COUNT = 30


@dataclass(frozen=True)
class Topics:
    bootstrap: str
    plain: str  # 3 partitions, record i on partition i % 3; null keys, null values, headers
    transactional: str  # 1 partition: committed, aborted and plain records, in that order
    pattern: str  # a regex matching two topics of one partition each, and nothing else
    patterned: tuple[str, str]


def _headers(i: int) -> list[tuple[str, bytes | None]] | None:
    return [("trace", f"t{i}".encode()), ("empty", None)] if i % 4 == 0 else None


@pytest.fixture(scope="module")
def topics(kafka: KafkaCluster) -> Topics:
    bootstrap = kafka.bootstrap_servers
    plain = create_topic(bootstrap, partitions=3)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(PLAIN_COUNT):
        producer.produce(
            plain,
            key=None if i % 7 == 0 else f"k{i}",
            value=None if i % 11 == 0 else f"v{i}",
            partition=i % 3,
            headers=_headers(i),
            timestamp=BASE_MS + i * 1000,
        )
    unique = f"conformance-{uuid.uuid4().hex[:8]}"
    patterned = (f"{unique}-a", f"{unique}-b")
    for name in patterned:
        create_topic(bootstrap, partitions=1, name=name)
        for i in range(3):
            producer.produce(name, key=f"{name}-{i}", value=str(i))
    assert producer.flush(30) == 0
    transactional = create_topic(bootstrap, partitions=1)
    _write_transactions(bootstrap, transactional)
    return Topics(bootstrap, plain, transactional, rf"{unique}-.*", patterned)


def _write_transactions(bootstrap: str, topic: str) -> None:
    """3 committed, 2 aborted, 2 committed records, then 1 outside any transaction."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"c-{topic}"})
    producer.init_transactions(30)
    for values, commit in ((("c0", "c1", "c2"), True), (("a0", "a1"), False), (("c3", "c4"), True)):
        producer.begin_transaction()
        for value in values:
            producer.produce(topic, value=value)
        producer.flush(30)
        (producer.commit_transaction if commit else producer.abort_transaction)(30)
    plain = Producer({"bootstrap.servers": bootstrap})
    plain.produce(topic, value="p0")
    assert plain.flush(30) == 0


def _rows(frame: DataFrame) -> list[tuple[Any, ...]]:
    """Every column of every row, in (topic, partition, offset) order."""
    return _ordered(tuple(row) for row in frame.collect())


def _ordered(rows: Iterable[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return sorted(rows, key=lambda r: (r[2], r[3], r[4]))


def _read(spark: SparkSession, format_name: str, bootstrap: str, **options: str) -> DataFrame:
    return (
        spark.read.format(format_name)
        .option("kafka.bootstrap.servers", bootstrap)
        .options(**options)
        .load()
    )


def _batch_cases(t: Topics) -> Iterator[tuple[str, dict[str, str]]]:
    json_start = {t.plain: {"0": 2, "1": -2, "2": 5}}
    json_end = {t.plain: {"0": 8, "1": -1, "2": 9}}
    at = {str(p): BASE_MS + 10_000 for p in range(3)}
    until = {str(p): BASE_MS + 25_000 for p in range(3)}
    yield "subscribe", {"subscribe": t.plain}
    yield "subscribePattern", {"subscribePattern": t.pattern}
    yield "assign", {"assign": json.dumps({t.plain: [0, 2]})}
    yield (
        "offsets as JSON",
        {
            "subscribe": t.plain,
            "startingOffsets": json.dumps(json_start),
            "endingOffsets": json.dumps(json_end),
        },
    )
    yield (
        "earliest and latest",
        {
            "subscribe": t.plain,
            "startingOffsets": "earliest",
            "endingOffsets": "latest",
        },
    )
    yield (
        "startingTimestamp and endingTimestamp",
        {
            "subscribe": t.plain,
            "startingTimestamp": str(BASE_MS + 10_000),
            "endingTimestamp": str(BASE_MS + 25_000),
        },
    )
    yield (
        "offsets by timestamp",
        {
            "subscribe": t.plain,
            "startingOffsetsByTimestamp": json.dumps({t.plain: at}),
            "endingOffsetsByTimestamp": json.dumps({t.plain: until}),
        },
    )
    yield "includeHeaders", {"subscribe": t.plain, "includeHeaders": "true"}
    yield (
        "aborted transactions, read_committed",
        {
            "subscribe": t.transactional,
            "kafka.isolation.level": "read_committed",
        },
    )


@pytest.mark.parametrize(
    "case",
    [
        "subscribe",
        "subscribePattern",
        "assign",
        "offsets as JSON",
        "earliest and latest",
        "startingTimestamp and endingTimestamp",
        "offsets by timestamp",
        "includeHeaders",
        "aborted transactions, read_committed",
    ],
)
def test_a_batch_read_gives_sparks_rows(spark: SparkSession, topics: Topics, case: str) -> None:
    options = dict(_batch_cases(topics))[case]
    spark_frame, ours = (_read(spark, f, topics.bootstrap, **options) for f in FORMATS)
    assert ours.schema == spark_frame.schema
    expected = _rows(spark_frame)
    assert expected, "the case reads nothing: it would compare nothing"
    assert _rows(ours) == expected


def test_the_isolation_level_differs_on_purpose(spark: SparkSession, topics: Topics) -> None:
    """docs/source.md, difference 6: Spark's source reads ``read_uncommitted`` (the Java
    client's default) and shows aborted records; kafka-eos reads ``read_committed``."""
    options = {"subscribe": topics.transactional}
    spark_rows, ours = (_rows(_read(spark, f, topics.bootstrap, **options)) for f in FORMATS)
    values = [r[1] for r in spark_rows]
    assert values == [b"c0", b"c1", b"c2", b"a0", b"a1", b"c3", b"c4", b"p0"]
    assert ours == [r for r in spark_rows if not r[1].startswith(b"a")]


def _stream(
    spark: SparkSession,
    format_name: str,
    bootstrap: str,
    checkpoint: Path,
    strictly_available_now: bool = False,
    **options: str,
) -> list[list[tuple[Any, ...]]]:
    """The rows of each micro-batch of an ``AvailableNow`` run, in batch order: a run to the
    end on PySpark 4.0 and 4.1 (integration_tests.available_now) unless
    ``strictly_available_now``."""
    batches: dict[int, list[tuple[Any, ...]]] = {}

    def collect(frame: DataFrame, batch_id: int) -> None:
        batches[batch_id] = _rows(frame)

    writer = (
        spark.readStream.format(format_name)
        .option("kafka.bootstrap.servers", bootstrap)
        .options(**options)
        .load()
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint / format_name))
    )
    if strictly_available_now:
        query = writer.trigger(availableNow=True).start()
        query.awaitTermination(240)
    else:
        query = available_now.start(writer)
        available_now.wait(query, 240)
    assert not query.isActive, "the AvailableNow run did not end"
    return [batches[b] for b in sorted(batches)]


@pytest.mark.parametrize(
    "case",
    ["earliest", "latest", "JSON and headers", "minOffsetsPerTrigger under AvailableNow"],
)
def test_a_stream_gives_sparks_batches(
    spark: SparkSession, topics: Topics, tmp_path: Path, case: str
) -> None:
    options = {
        "earliest": {"startingOffsets": "earliest"},
        "latest": {"startingOffsets": "latest"},  # nothing new arrives: no rows for either
        "JSON and headers": {
            "startingOffsets": json.dumps({topics.plain: {"0": 3, "1": -2, "2": 1}}),
            "includeHeaders": "true",
        },
        # Both ignore the minimum under AvailableNow, where waiting could never end.
        "minOffsetsPerTrigger under AvailableNow": {
            "startingOffsets": "earliest",
            "minOffsetsPerTrigger": "1000",
            "maxTriggerDelay": "1h",
        },
    }[case]
    spark_batches, ours = (
        _stream(spark, f, topics.bootstrap, tmp_path, subscribe=topics.plain, **options)
        for f in FORMATS
    )
    flat = [row for batch in spark_batches for row in batch]
    assert [row for batch in ours for row in batch] == flat
    assert bool(flat) == (case != "latest")


def test_max_offsets_per_trigger_never_exceeds_the_cap(
    spark: SparkSession, topics: Topics, tmp_path: Path
) -> None:
    """docs/source.md, difference 3: both split the cap by backlog; Spark rounds each share
    down (or up below one offset), kafka-eos hands out the remainder, never above the cap.
    The same rows in the end, in batches of other sizes."""
    options = {"subscribe": topics.plain, "startingOffsets": "earliest"}
    spark_batches, ours = (
        _stream(spark, f, topics.bootstrap, tmp_path, maxOffsetsPerTrigger="10", **options)
        for f in FORMATS
    )
    assert [len(b) for b in ours] == [10, 10, 10]  # 30 offsets, a cap of 10: filled each time
    assert [len(b) for b in spark_batches] == [9, 9, 9, 3]  # 3 x floor(10/3), then the rest
    assert _ordered(r for b in ours for r in b) == _ordered(r for b in spark_batches for r in b)


def test_available_now_under_a_cap_reads_one_batch_before_pyspark_4_2(
    spark: SparkSession, topics: Topics, tmp_path: Path
) -> None:
    """docs/source.md, "PySpark 4.0 and 4.1": those run Trigger.AvailableNow over a Python
    source as one batch, and the source applies maxOffsetsPerTrigger to it; Spark's own source,
    and kafka-eos on PySpark 4.2 and later, read all 30 offsets in that run."""
    options = {"subscribe": topics.plain, "startingOffsets": "earliest"}
    batches = _stream(
        spark, "kafka-eos", topics.bootstrap, tmp_path, True, maxOffsetsPerTrigger="10", **options
    )
    assert [len(b) for b in batches] == ([10, 10, 10] if ADMISSION_CONTROL else [10])


def _records_in(bootstrap: str, outputs: list[str]) -> list[tuple[Any, ...]]:
    """(output index, partition, key, value, headers) of every record read_committed sees."""
    return [
        (index, r.partition, r.key, r.value, r.headers)
        for index, output in enumerate(outputs)
        for r in drain(bootstrap, output, "read_committed")
    ]


@pytest.mark.parametrize(
    ("topic_from", "headers"), [("option", True), ("column", True), ("column", False)]
)
def test_the_sink_writes_what_sparks_sink_writes(
    spark: SparkSession, topics: Topics, tmp_path: Path, topic_from: str, headers: bool
) -> None:
    """Keys, values (nulls among them), headers and the partition column, to the topic of the
    option or of each row's ``topic`` column: the records a read_committed reader finds are
    the same, partition by partition. Not their order within a partition, which two tasks
    writing to it interleave in either sink, nor their offsets: kafka-eos writes in
    transactions, and its commit markers take offsets. Without headers, kafka-eos writes
    with ``produce_batch``, which must still put each row in its partition."""
    written: dict[str, list[tuple[Any, ...]]] = {}
    for format_name in FORMATS:
        outputs = [create_topic(topics.bootstrap, partitions=2) for _ in range(2)]
        columns = [
            "key",
            "value",
            *(["headers"] if headers else []),
            "CAST(partition % 2 AS INT) AS partition",
            f"IF(offset % 2 = 0, '{outputs[0]}', '{outputs[1]}') AS topic",
        ]
        writer = (
            spark.readStream.format("kafka-eos")
            .option("kafka.bootstrap.servers", topics.bootstrap)
            .option("subscribe", topics.plain)
            .option("startingOffsets", "earliest")
            .option("includeHeaders", "true")
            .load()
            .selectExpr(*columns)
            .writeStream.format(format_name)
            .option("kafka.bootstrap.servers", topics.bootstrap)
            .option("checkpointLocation", str(tmp_path / format_name))
        )
        if topic_from == "option":  # wins over the column, in both
            writer = writer.option("topic", outputs[0])
        query = writer.trigger(availableNow=True).start()
        query.awaitTermination(240)
        assert query.exception() is None and not query.isActive
        written[format_name] = _records_in(topics.bootstrap, outputs)
    spark_records, ours = (written[f] for f in FORMATS)
    assert len(spark_records) == PLAIN_COUNT
    assert Counter(r[0] for r in spark_records) == (
        Counter({0: PLAIN_COUNT}) if topic_from == "option" else Counter({0: 15, 1: 15})
    )
    assert any(r[2] is None for r in ours) and any(r[3] is None for r in ours)
    assert any(r[4] for r in ours) == headers  # headers made it through, if any
    assert Counter(ours) == Counter(spark_records)


def _aggregate_written(
    spark: SparkSession, topics: Topics, checkpoint: Path, format_name: str, mode: str
) -> tuple[str, Exception | None]:
    """A count per input partition, written in output ``mode``: the output topic, and the
    error that refused the query (at its start or at its first batch), if any."""
    output = create_topic(topics.bootstrap, partitions=1)
    writer = (
        spark.readStream.format("kafka-eos")
        .option("kafka.bootstrap.servers", topics.bootstrap)
        .option("subscribe", topics.plain)
        .option("startingOffsets", "earliest")
        .load()
        .groupBy("partition")
        .count()
        .selectExpr("CAST(partition AS STRING) AS key", "CAST(count AS STRING) AS value")
        .writeStream.format(format_name)
        .outputMode(mode)
        .option("kafka.bootstrap.servers", topics.bootstrap)
        .option("topic", output)
        .option("checkpointLocation", str(checkpoint))
    )
    try:
        query = writer.trigger(availableNow=True).start()
        query.awaitTermination(240)  # raises the query's failure
    except Exception as refused:
        return output, refused
    assert not query.isActive
    return output, None


@pytest.mark.parametrize("mode", ["complete", "update"])
def test_an_aggregate_in_complete_mode_is_written_as_spark_writes_it_and_update_is_refused(
    spark: SparkSession, topics: Topics, tmp_path: Path, mode: str
) -> None:
    """Spark's sink takes both modes. kafka-eos takes complete mode, and writes each batch's
    whole result table as Spark's sink does. PySpark refuses update mode for every Python data
    source's sink, before kafka-eos is called (docs/sink.md, "Output modes")."""
    written = {}
    for format_name in FORMATS:
        checkpoint = tmp_path / format_name
        output, error = _aggregate_written(spark, topics, checkpoint, format_name, mode)
        if mode == "update" and format_name == "kafka-eos":
            assert "does not support Update mode" in str(error), error
            assert drain(topics.bootstrap, output, "read_uncommitted") == []
            continue
        assert error is None, error
        written[format_name] = _records_in(topics.bootstrap, [output])
    assert Counter(written["kafka"]) == Counter(
        (0, 0, str(p).encode(), b"10", ()) for p in range(3)
    )
    if mode == "complete":
        assert Counter(written["kafka-eos"]) == Counter(written["kafka"])


def test_a_keyed_row_without_a_partition_lands_where_sparks_sink_puts_it(
    spark: SparkSession, topics: Topics, tmp_path: Path
) -> None:
    """Spark's sink leaves the partition to the Java producer's default partitioner: murmur2
    of the key. kafka-eos uses librdkafka's ``murmur2_random``, the same hash, so a job moved
    from ``format("kafka")`` keeps every key on its partition (per-key order across the
    switch, and co-partitioning with every Java producer of the topic). librdkafka's own
    default (``consistent_random``, CRC32) would put most keys elsewhere."""
    keys = [f"customer-{i}" for i in range(1000)]
    source = create_topic(topics.bootstrap, partitions=3)
    producer = Producer({"bootstrap.servers": topics.bootstrap})
    for i, key in enumerate(keys):
        producer.produce(source, key=key, value=str(i), partition=i % 3)
    assert producer.flush(30) == 0
    placed: dict[str, dict[bytes, int]] = {}
    for format_name in FORMATS:
        output = create_topic(topics.bootstrap, partitions=7)
        query = (
            spark.readStream.format("kafka-eos")
            .option("kafka.bootstrap.servers", topics.bootstrap)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .load()
            .selectExpr("key", "value")
            .writeStream.format(format_name)
            .option("kafka.bootstrap.servers", topics.bootstrap)
            .option("topic", output)
            .option("checkpointLocation", str(tmp_path / format_name))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(240)
        assert query.exception() is None and not query.isActive
        placed[format_name] = {
            r.key: r.partition for r in drain(topics.bootstrap, output, "read_committed")
        }
    spark_placed, ours = (placed[f] for f in FORMATS)
    assert len(spark_placed) == len(keys) and len(set(spark_placed.values())) == 7
    assert ours == spark_placed


def test_a_batch_write_writes_what_sparks_batch_sink_writes(
    spark: SparkSession, topics: Topics, tmp_path: Path
) -> None:
    """``df.write`` in append mode, row for row: keys, values (nulls among them), headers, the
    topic column, and a partition column that is null for some keyed rows, which the
    partitioner then places (murmur2 of the key, in both). Both refuse ``overwrite``; a
    rerun of kafka-eos's write on its location writes nothing."""
    written: dict[str, list[tuple[Any, ...]]] = {}
    for format_name in FORMATS:
        outputs = [create_topic(topics.bootstrap, partitions=3) for _ in range(2)]
        frame = (
            spark.read.format("kafka-eos")
            .option("kafka.bootstrap.servers", topics.bootstrap)
            .option("subscribe", topics.plain)
            .option("includeHeaders", "true")
            .load()
            .selectExpr(
                "key",
                "value",
                "headers",
                "IF(key IS NULL OR offset % 2 = 0, CAST(partition % 3 AS INT), NULL) AS partition",
                f"IF(offset % 3 = 0, '{outputs[0]}', '{outputs[1]}') AS topic",
            )
        )
        writer = (
            frame.write.format(format_name)
            .option("kafka.bootstrap.servers", topics.bootstrap)
            .option("checkpointLocation", str(tmp_path / format_name))
        )
        with pytest.raises(Exception, match=r"(?i)overwrite"):
            writer.mode("overwrite").save()
        writer.mode("append").save()
        if format_name == "kafka-eos":  # the location holds one write: a rerun writes nothing
            with pytest.raises(Exception, match=r"ALREADY_WRITTEN.*it was committed"):
                writer.mode("append").save()
        written[format_name] = _records_in(topics.bootstrap, outputs)
    spark_records, ours = (written[f] for f in FORMATS)
    assert len(spark_records) == PLAIN_COUNT
    assert Counter(r[0] for r in spark_records) == Counter({0: 12, 1: 18})
    assert any(r[2] is None for r in ours) and any(r[3] is None for r in ours)
    assert any(r[4] for r in ours)
    assert Counter(ours) == Counter(spark_records)


# Records around the producers' default size limits (key + value): librdkafka's
# message.max.bytes is 1,000,000; Java's max.request.size 1,048,576, which its check applies
# to the record with its overhead; the broker's topic default (max.message.bytes) is 1,048,588
# for a whole record batch.
LARGE_SIZES = (10, 999_999, 1_000_000, 1_000_001, 1_040_000)


def test_a_large_record_sparks_sink_writes_is_written_too(
    spark: SparkSession, topics: Topics, tmp_path: Path
) -> None:
    """With both sinks' defaults, every record Spark's sink writes, kafka-eos writes, whole
    and to the same partition: a drop-in that refused a record Spark's sink took would fail a
    job on its first large record."""
    written: dict[str, list[tuple[Any, ...]]] = {}
    for format_name in FORMATS:
        output = create_topic(topics.bootstrap, partitions=2)
        rows = [(f"{i:04d}", size) for i, size in enumerate(LARGE_SIZES)]
        (
            spark.createDataFrame(rows, "key string, size int")
            .repartition(2)
            .selectExpr("key", "concat(key, repeat('x', size - 8)) AS value")
            .write.format(format_name)
            .mode("append")
            .option("kafka.bootstrap.servers", topics.bootstrap)
            .option("topic", output)
            .option("checkpointLocation", str(tmp_path / format_name))
            .save()
        )
        written[format_name] = sorted(
            (r.partition, r.key, len(r.key) + len(r.value), hashlib.sha256(r.value).hexdigest())
            for r in drain(topics.bootstrap, output, "read_committed")
        )
    spark_records, ours = (written[f] for f in FORMATS)
    assert sorted(size for _, _, size, _ in spark_records) == sorted(LARGE_SIZES)
    assert ours == spark_records
