"""Partitions that appear mid-stream are read from their earliest offset: partitions added
to a subscribed topic (``create_partitions``) and a new topic matching ``subscribePattern``."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from pyspark.sql import SparkSession

from integration_tests.source.conftest import QUERY_TIMEOUT_S, Batches, produce, start_stream
from kafka_eos.cluster import KafkaCluster

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def _wait_for(sink: Batches, expected: set[int]) -> None:
    deadline = time.monotonic() + QUERY_TIMEOUT_S
    while set(sink.counts()) != expected:
        missing = sorted(expected - set(sink.counts()))[:10]
        assert time.monotonic() < deadline, f"never delivered: {missing}"
        time.sleep(0.5)


def _wait_for_partitions(admin: AdminClient, topic: str, count: int) -> None:
    """Wait until the broker's metadata shows ``count`` partitions of ``topic``: a record sent
    to a partition its producer does not know yet fails, and would never be delivered."""
    deadline = time.monotonic() + 30
    while len(admin.list_topics(topic, timeout=10).topics[topic].partitions) < count:
        assert time.monotonic() < deadline, f"{topic} never showed {count} partitions"
        time.sleep(0.2)


def _create(admin: AdminClient, name: str) -> None:
    for future in admin.create_topics([NewTopic(name, 1, 1)]).values():
        future.result(timeout=30)


def test_added_partitions_and_new_matching_topics_start_at_earliest(
    source_spark: SparkSession, kafka: KafkaCluster, checkpoint: Path
) -> None:
    bootstrap = kafka.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    prefix = f"pattern-{uuid.uuid4().hex[:8]}"
    _create(admin, f"{prefix}-a")
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

        for future in admin.create_partitions([NewPartitions(f"{prefix}-a", 3)]).values():
            future.result(timeout=30)
        _wait_for_partitions(admin, f"{prefix}-a", 3)
        produce(bootstrap, f"{prefix}-a", range(50, 100), partition=1)
        produce(bootstrap, f"{prefix}-a", range(100, 150), partition=2)
        _wait_for(sink, set(range(150)))

        _create(admin, f"{prefix}-b")
        produce(bootstrap, f"{prefix}-b", range(150, 200))
        _wait_for(sink, set(range(200)))
    finally:
        query.stop()
    sink.assert_exactly_once(range(200))
