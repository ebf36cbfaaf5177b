"""Offsets deleted before the query read them (``AdminClient.delete_records``, as retention
does): ``failOnDataLoss=true`` fails naming the partition and the missing range; ``false``
warns and goes on from the earliest offset still there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from integration_tests.source.conftest import (
    Batches,
    batch_frame,
    delete_records_below,
    keys_of,
    options_for,
    produce,
    run_to_end,
    run_to_failure,
    start_stream,
)
from kafka_eos.cluster import KafkaCluster

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def test_truncated_offsets_fail_then_are_skipped_when_allowed(
    source_spark: SparkSession, kafka: KafkaCluster, topic_factory, checkpoint: Path
) -> None:
    bootstrap, topic = kafka.bootstrap_servers, topic_factory(partitions=1)
    sink = Batches()
    produce(bootstrap, topic, range(100))
    run_to_end(start_stream(source_spark, options_for(bootstrap, topic), checkpoint, sink))
    produce(bootstrap, topic, range(100, 200))
    delete_records_below(bootstrap, topic, 150)

    error = run_to_failure(
        start_stream(source_spark, options_for(bootstrap, topic), checkpoint, sink)
    )
    assert f"offsets [100, 150) of {topic}-0 are no longer available" in error
    assert "failOnDataLoss=false" in error

    lenient = options_for(bootstrap, topic, failOnDataLoss="false")
    run_to_end(start_stream(source_spark, lenient, checkpoint, sink))
    sink.assert_exactly_once([*range(100), *range(150, 200)])


def test_batch_read_of_a_truncated_start(
    source_spark: SparkSession, kafka: KafkaCluster, topic_factory
) -> None:
    bootstrap, topic = kafka.bootstrap_servers, topic_factory(partitions=1)
    produce(bootstrap, topic, range(50))
    delete_records_below(bootstrap, topic, 20)
    start = json.dumps({topic: {"0": 5}})
    with pytest.raises(Exception, match=rf"offsets \[5, 20\) of {topic}-0 are no longer"):
        batch_frame(source_spark, bootstrap, topic, startingOffsets=start).collect()
    lenient = batch_frame(
        source_spark, bootstrap, topic, startingOffsets=start, failOnDataLoss="false"
    )
    assert keys_of(lenient) == list(range(20, 50))
