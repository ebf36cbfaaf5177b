"""Partitions that appear mid-stream are read from their earliest offset: partitions added
to a subscribed topic (``create_partitions``) and a new topic matching ``subscribePattern``;
one whose log start is high shares ``maxOffsetsPerTrigger`` from there, as in Spark."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from integration_tests.conftest import create_topic
from integration_tests.source.conftest import (
    Batches,
    add_partitions,
    delete_records_below,
    options_for,
    produce,
    run_to_end,
    start_stream,
    wait_until,
)
from kafka_eos.cluster import KafkaCluster

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def _wait_for(sink: Batches, expected: set[int]) -> None:
    wait_until(
        lambda: set(sink.counts()) == expected,
        lambda: f"never delivered: {sorted(expected - set(sink.counts()))[:10]}",
        interval_s=0.5,
    )


def test_added_partitions_and_new_matching_topics_start_at_earliest(
    source_spark: SparkSession, kafka: KafkaCluster, checkpoint: Path
) -> None:
    bootstrap = kafka.bootstrap_servers
    prefix = f"pattern-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, name=f"{prefix}-a")
    options = {
        "kafka.bootstrap.servers": bootstrap,
        "subscribePattern": f"{prefix}-.*",
        "startingOffsets": "earliest",
    }
    sink = Batches()
    query = start_stream(source_spark, options, checkpoint, sink, available_now=False)
    try:
        produce(bootstrap, f"{prefix}-a", range(50))
        _wait_for(sink, set(range(50)))

        add_partitions(bootstrap, f"{prefix}-a", 3)
        produce(bootstrap, f"{prefix}-a", range(50, 100), partition=1)
        produce(bootstrap, f"{prefix}-a", range(100, 150), partition=2)
        _wait_for(sink, set(range(150)))

        create_topic(bootstrap, name=f"{prefix}-b")
        produce(bootstrap, f"{prefix}-b", range(150, 200))
        _wait_for(sink, set(range(200)))
    finally:
        query.stop()
    sink.assert_exactly_once(range(200))


def test_a_new_partition_with_a_high_log_start_is_rate_limited_from_there(
    source_spark: SparkSession, kafka: KafkaCluster, topic_factory, checkpoint: Path
) -> None:
    """Issue 13, finding 4. Partition 1 appears while the query is down, and its first 1,000
    records are deleted (log start 1,000). Spark shares ``maxOffsetsPerTrigger`` in proportion
    to latest - earliest: 300 offsets of partition 0 and 100 of partition 1 give 30 + 10 per
    batch of 40. Counted from offset 0, partition 1 took 32 of every 40 offsets, all below its
    log start (0 rows, a data-loss warning per batch), and partition 0 got 8 for ~35 batches.
    The deleted head is reported once, at planning, as Spark does, hence
    ``failOnDataLoss=false``; every record that still exists is read exactly once."""
    bootstrap, topic = kafka.bootstrap_servers, topic_factory(partitions=1)
    options = options_for(bootstrap, topic, maxOffsetsPerTrigger="40", failOnDataLoss="false")
    produce(bootstrap, topic, range(10), partition=0)
    sink = Batches()
    run_to_end(start_stream(source_spark, options, checkpoint, sink))
    assert sink.counts() == dict.fromkeys(range(10), 1)
    first_new_batch = max(sink.by_id) + 1

    add_partitions(bootstrap, topic, 2)
    produce(bootstrap, topic, range(1000, 2000), partition=1)
    assert delete_records_below(bootstrap, topic, 1000, partition=1) == 1000
    produce(bootstrap, topic, range(2000, 2100), partition=1)
    produce(bootstrap, topic, range(3000, 3300), partition=0)

    run_to_end(start_stream(source_spark, options, checkpoint, sink))
    shares = [
        (sum(k >= 3000 for k in sink.by_id[b]), sum(2000 <= k < 3000 for k in sink.by_id[b]))
        for b in sorted(sink.by_id)
        if b >= first_new_batch
    ]
    assert shares == [(30, 10)] * 10
    sink.assert_exactly_once([*range(10), *range(2000, 2100), *range(3000, 3300)])
