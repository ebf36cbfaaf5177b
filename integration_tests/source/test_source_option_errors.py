"""Bad or contradictory options fail when the query starts, naming the option, the value
seen and the fix, whether Spark reports them from the planner or from the driver."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from integration_tests.source.conftest import Batches, options_for, produce, start_stream
from kafka_eos.cluster import KafkaCluster

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def _batch_error(spark: SparkSession, options: dict[str, str], schema: str | None = None) -> str:
    """The error of a batch read; options are given whole (not from ``options_for``) since
    some tests replace the subscription."""
    reader = spark.read.format("kafka-eos").options(**options)
    if schema is not None:
        reader = reader.schema(schema)
    with pytest.raises(Exception) as caught:
        reader.load().collect()
    return str(caught.value)


def _stream_error(spark: SparkSession, options: dict[str, str], checkpoint: Path) -> str:
    with pytest.raises(Exception) as caught:
        query = start_stream(spark, options, checkpoint, Batches())
        query.awaitTermination(120)
    return str(caught.value)


@pytest.fixture
def topic(kafka: KafkaCluster, topic_factory) -> str:
    name = topic_factory(partitions=2)
    produce(kafka.bootstrap_servers, name, range(20))
    return name


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"assign": '{"x": [0]}'}, "several are set; set exactly one of subscribe"),
        ({"kafka.auto.offset.reset": "earliest"}, "kafka.auto.offset.reset='earliest'"),
        ({"kafka.no.such.setting": "1"}, "librdkafka has no property 'no.such.setting'"),
        ({"startingOffsets": "latest"}, "startingOffsets='latest'"),
        ({"minPartitions": "0"}, "minPartitions='0'"),
        ({"fetchOffset.numRetries": "banana"}, "fetchOffset.numRetries='banana'"),
    ],
)
def test_batch_option_errors(
    source_spark: SparkSession, kafka: KafkaCluster, topic: str, extra: dict, expected: str
) -> None:
    assert expected in _batch_error(
        source_spark, options_for(kafka.bootstrap_servers, topic, **extra)
    )


def test_offsets_must_name_every_partition_and_stay_below_latest(
    source_spark: SparkSession, kafka: KafkaCluster, topic: str
) -> None:
    only_zero = options_for(
        kafka.bootstrap_servers, topic, startingOffsets=json.dumps({topic: {"0": 1}})
    )
    error = _batch_error(source_spark, only_zero)
    assert (
        "must name exactly the partitions being read" in error and f"missing: {topic}-1;" in error
    )
    beyond = options_for(
        kafka.bootstrap_servers, topic, endingOffsets=json.dumps({topic: {"0": 500, "1": -1}})
    )
    error = _batch_error(source_spark, beyond)
    assert f"endingOffsets='{topic}-0=500'" in error
    assert f"beyond the latest offsets {topic}-0=" in error and "failOnDataLoss=false" in error
    # Spark's outcome with failOnDataLoss=false: the read ends at the latest offset.
    lenient = {**beyond, "failOnDataLoss": "false"}
    assert source_spark.read.format("kafka-eos").options(**lenient).load().count() == 20


def test_assigned_partitions_must_exist(
    source_spark: SparkSession, kafka: KafkaCluster, topic: str
) -> None:
    options = {"kafka.bootstrap.servers": kafka.bootstrap_servers, "assign": f'{{"{topic}": [7]}}'}
    assert f"assign='{topic}-7'" in _batch_error(source_spark, options)


def test_the_schema_is_fixed(source_spark: SparkSession, kafka: KafkaCluster, topic: str) -> None:
    error = _batch_error(source_spark, options_for(kafka.bootstrap_servers, topic), "value string")
    assert "fixed schema" in error


def test_streaming_option_errors(
    source_spark: SparkSession, kafka: KafkaCluster, topic: str, tmp_path: Path
) -> None:
    bootstrap = kafka.bootstrap_servers
    ending = options_for(bootstrap, topic, endingOffsets="latest")
    assert "ending offsets are for batch queries" in _stream_error(
        source_spark, ending, tmp_path / "a"
    )
    contradiction = options_for(
        bootstrap, topic, minOffsetsPerTrigger="100", maxOffsetsPerTrigger="10"
    )
    assert "above maxOffsetsPerTrigger=10" in _stream_error(
        source_spark, contradiction, tmp_path / "b"
    )
