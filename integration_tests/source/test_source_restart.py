"""Restarts resume exactly from Spark's offset log: no record lost, none in two batches.

Faults injected: the query ends between batches (an AvailableNow run finishes) and restarts
after more data arrived; the sink crashes in the middle of a batch and the query restarts
with the same checkpoint, so Spark replays that batch. Group offsets committed for
monitoring are then moved on purpose: recovery must ignore them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient
from pyspark.sql import SparkSession

from integration_tests.source.conftest import (
    Batches,
    options_for,
    produce,
    run_to_end,
    run_to_failure,
    start_stream,
)
from kafka_eos.cluster import KafkaCluster

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def test_restart_between_batches_reads_on_from_the_offset_log(
    source_spark: SparkSession, kafka: KafkaCluster, topic_factory, checkpoint: Path
) -> None:
    bootstrap, topic = kafka.bootstrap_servers, topic_factory(partitions=3)
    options = options_for(bootstrap, topic, maxOffsetsPerTrigger="100")
    sink = Batches()
    produce(bootstrap, topic, range(300))
    run_to_end(start_stream(source_spark, options, checkpoint, sink))
    first_run = set(sink.by_id)
    produce(bootstrap, topic, range(300, 500))
    run_to_end(start_stream(source_spark, options, checkpoint, sink))
    assert min(set(sink.by_id) - first_run) == max(first_run) + 1, "batch ids start over"
    sink.assert_exactly_once(range(500))


def test_crash_mid_batch_replays_the_same_records(
    source_spark: SparkSession, kafka: KafkaCluster, topic_factory, checkpoint: Path
) -> None:
    bootstrap, topic = kafka.bootstrap_servers, topic_factory(partitions=2)
    group = f"monitor-{topic}"
    options = options_for(bootstrap, topic, maxOffsetsPerTrigger="60", **{"kafka.group.id": group})
    produce(bootstrap, topic, range(400))
    sink = Batches(fail_at=3)
    error = run_to_failure(start_stream(source_spark, options, checkpoint, sink))
    assert "injected crash in the middle of batch 3" in error
    assert 3 in sink.by_id

    # The driver committed the completed batches to the group for lag monitoring. Rewind the
    # group to 0: a restart must ignore it and resume from Spark's offset log.
    admin = AdminClient({"bootstrap.servers": bootstrap})
    committed = _group_offsets(admin, group, topic)
    assert 0 < sum(committed.values()) < 400
    rewind = [TopicPartition(topic, p, 0) for p in committed]
    for future in admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, rewind)]
    ).values():
        future.result(timeout=30)

    query = start_stream(source_spark, options, checkpoint, sink)
    run_to_end(query)
    sink.assert_exactly_once(range(400))
    # Spark commits a batch's end to the source when it plans the next batch, so after an
    # AvailableNow run the group is one batch behind the query.
    ends = [json.loads(p["sources"][0]["endOffset"])[topic] for p in query.recentProgress]
    assert _group_offsets(admin, group, topic) == {int(p): o for p, o in ends[-2].items()}


def _group_offsets(admin: AdminClient, group: str, topic: str) -> dict[int, int]:
    request = [ConsumerGroupTopicPartitions(group)]
    (future,) = admin.list_consumer_group_offsets(request).values()
    parts = future.result(timeout=30).topic_partitions
    return {tp.partition: tp.offset for tp in parts if tp.topic == topic}
