"""Admission control: maxOffsetsPerTrigger caps every batch, minOffsetsPerTrigger with
maxTriggerDelay holds batches back, and Trigger.AvailableNow stops at the end it saw first."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

from integration_tests.source.conftest import (
    QUERY_TIMEOUT_S,
    Batches,
    options_for,
    produce,
    run_to_end,
    start_stream,
)
from kafka_eos.cluster import KafkaCluster

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def test_max_offsets_per_trigger_caps_every_batch(
    source_spark: SparkSession, kafka: KafkaCluster, topic_factory, checkpoint: Path
) -> None:
    bootstrap, topic = kafka.bootstrap_servers, topic_factory(partitions=3)
    for partition, count in enumerate((200, 80, 20)):
        first = partition * 1000
        produce(bootstrap, topic, range(first, first + count), partition=partition)
    sink = Batches()
    query = start_stream(
        source_spark, options_for(bootstrap, topic, maxOffsetsPerTrigger="40"), checkpoint, sink
    )
    run_to_end(query)
    sizes = [len(sink.by_id[batch]) for batch in sorted(sink.by_id)]
    assert sizes == [40] * 7 + [20]
    assert [p["numInputRows"] for p in query.recentProgress] == sizes
    sink.assert_exactly_once([*range(200), *range(1000, 1080), *range(2000, 2020)])


class _ProducingSink(Batches):
    """Writes more records to the topic while the first batch runs: they arrive after the
    AvailableNow query fixed its end, so this run must not read them."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__()
        self._bootstrap, self._topic = bootstrap, topic

    def __call__(self, frame: DataFrame, batch_id: int) -> None:
        if batch_id == 0:
            produce(self._bootstrap, self._topic, range(100, 150))
        super().__call__(frame, batch_id)


def test_available_now_stops_at_the_end_seen_at_start(
    source_spark: SparkSession, kafka: KafkaCluster, topic_factory, checkpoint: Path
) -> None:
    bootstrap, topic = kafka.bootstrap_servers, topic_factory(partitions=2)
    produce(bootstrap, topic, range(100))
    options = options_for(bootstrap, topic, maxOffsetsPerTrigger="30")
    sink = _ProducingSink(bootstrap, topic)
    run_to_end(start_stream(source_spark, options, checkpoint, sink))
    sink.assert_exactly_once(range(100))
    assert len(sink.by_id) == 4

    # The next run reads the records that arrived late (its batch ids go on from 4).
    run_to_end(start_stream(source_spark, options, checkpoint, sink))
    sink.assert_exactly_once(range(150))


def test_min_offsets_per_trigger_waits_for_data_or_the_delay(
    source_spark: SparkSession, kafka: KafkaCluster, topic_factory, checkpoint: Path
) -> None:
    bootstrap, topic = kafka.bootstrap_servers, topic_factory(partitions=2)
    options = options_for(bootstrap, topic, minOffsetsPerTrigger="100", maxTriggerDelay="8s")
    sink = Batches()
    query = start_stream(source_spark, options, checkpoint, sink, available_now=False)
    try:
        _wait(lambda: query.recentProgress, "the first trigger")
        produce(bootstrap, topic, range(30))
        time.sleep(2)
        assert sink.counts() == {}, "30 < minOffsetsPerTrigger offsets made a batch at once"
        _wait(lambda: len(sink.counts()) == 30, "the batch after maxTriggerDelay")
        produce(bootstrap, topic, range(30, 130))
        _wait(lambda: len(sink.counts()) == 130, "the batch of 100 new offsets")
    finally:
        query.stop()
    sink.assert_exactly_once(range(130))
    assert sorted(len(keys) for keys in sink.by_id.values() if keys) == [30, 100]


def _wait(condition: object, what: str) -> None:
    deadline = time.monotonic() + QUERY_TIMEOUT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)
