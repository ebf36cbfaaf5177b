"""``spark.read.format("kafka-eos")``: bounded reads with Spark's row schema, headers and
timestamps, from offsets or timestamps."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Producer
from pyspark.sql import SparkSession

from integration_tests.source.conftest import batch_frame, keys_of, produce
from kafka_eos.cluster import KafkaCluster

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

SPARK_KAFKA_SCHEMA = (
    "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
    "timestamp:timestamp,timestampType:int,headers:array<struct<key:string,value:binary>>>"
)


def test_offsets_schema_headers_and_timestamps(
    source_spark: SparkSession, kafka: KafkaCluster, topic_factory
) -> None:
    bootstrap, topic = kafka.bootstrap_servers, topic_factory(partitions=2)
    headers = [("trace", b"abc"), ("empty", None), ("trace", b"again")]
    produce(bootstrap, topic, range(10), partition=0, headers=headers)
    produce(bootstrap, topic, range(10, 20), partition=1)
    frame = batch_frame(
        source_spark,
        bootstrap,
        topic,
        includeHeaders="true",
        startingOffsets=json.dumps({topic: {"0": 2, "1": -2}}),
        endingOffsets=json.dumps({topic: {"0": 8, "1": -1}}),
        minPartitions="5",
    )
    assert frame.schema.simpleString() == SPARK_KAFKA_SCHEMA
    rows = sorted(frame.collect(), key=lambda r: (r.partition, r.offset))
    assert [(r.partition, r.offset, r.key, r.value) for r in rows] == [
        (p, o, str(k).encode(), str(k).encode())
        for p, o, k in [*((0, o, o) for o in range(2, 8)), *((1, o, 10 + o) for o in range(10))]
    ]
    assert {r.topic for r in rows} == {topic}
    assert {r.timestampType for r in rows} == {0}  # CreateTime, numbered as in Java
    assert all(abs(r.timestamp.timestamp() - time.time()) < 600 for r in rows)
    with_headers = [[(h.key, h.value) for h in r.headers] for r in rows if r.partition == 0]
    assert with_headers == [headers] * 6
    # Spark's source gives null, not an empty array, for a record without headers.
    assert {r.headers for r in rows if r.partition == 1} == {None}


def test_start_and_end_by_timestamp(
    source_spark: SparkSession, kafka: KafkaCluster, topic_factory
) -> None:
    bootstrap, topic = kafka.bootstrap_servers, topic_factory(partitions=1)
    base = 1_700_000_000_000
    producer = Producer({"bootstrap.servers": bootstrap})
    for n in range(10):
        producer.produce(topic, key=str(n).encode(), value=b"v", timestamp=base + 1000 * n)
    assert producer.flush(30) == 0

    def keys(**options: str) -> list[int]:
        return keys_of(batch_frame(source_spark, bootstrap, topic, **options))

    assert keys(startingTimestamp=str(base + 5000), endingTimestamp=str(base + 8000)) == [5, 6, 7]
    by_partition = json.dumps({topic: {"0": base + 7500}})
    assert keys(startingOffsetsByTimestamp=by_partition) == [8, 9]
    # No record at or after the ending timestamp: the read ends at the latest offset.
    assert keys(startingTimestamp=str(base + 9000), endingTimestamp=str(base + 99_000)) == [9]
    # No record at or after the starting timestamp: an error, or the latest offset if asked.
    with pytest.raises(Exception, match="startingOffsetsByTimestampStrategy=latest"):
        keys(startingTimestamp=str(base + 99_000))
    late = {"startingTimestamp": str(base + 99_000), "startingOffsetsByTimestampStrategy": "latest"}
    assert keys(**late) == []


def test_no_data_reads_nothing(
    source_spark: SparkSession, kafka: KafkaCluster, topic_factory
) -> None:
    bootstrap, topic = kafka.bootstrap_servers, topic_factory(partitions=2)
    assert batch_frame(source_spark, bootstrap, topic).count() == 0
