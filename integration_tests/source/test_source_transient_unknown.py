"""One metadata answer saying "unknown topic" is not a deletion: nothing is lost, nothing read
twice, and the partition resumes from its last planned offset.

Fault injected: on real Kafka, the source's metadata consumers are wrapped so that exactly one
answer lies (``lying_metadata.py``): on the driver, the listing of one trigger leaves the topic
out (``subscribePattern``) or calls it unknown (``subscribe``, ``assign``); in a task, one
``consume`` answer carries "unknown topic or partition" between real records and the next
metadata answer calls the topic unknown. Every later answer, and every record, is the real
Kafka's. The check is the exact count of every record in the query's output.
"""

from __future__ import annotations

import json
from collections import Counter
from itertools import pairwise
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from integration_tests.source.conftest import (
    Batches,
    every_trigger_reported,
    offset_total,
    produce,
    start_stream,
    wait_until,
)
from integration_tests.source.lying_metadata import LyingKafkaSource, told
from kafka_eos.cluster import KafkaCluster

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def _wait_for(query: StreamingQuery, sink: Batches, expected: set[int]) -> None:
    wait_until(
        lambda: expected <= set(sink.counts()),
        lambda: f"never delivered: {sorted(expected - set(sink.counts()))[:10]}",
        query=query,
        interval_s=0.5,
    )


def _wait_until_claimed(query: StreamingQuery, switch: Path) -> None:
    wait_until(
        lambda: not switch.exists(), f"the lie armed by {switch.name} was never told", query=query
    )


def _wait_until_settled(query: StreamingQuery, log_end: int) -> None:
    """Wait until the last two triggers ran no batch, the query's end and the latest offsets
    the source saw both at ``log_end`` (the offsets of all partitions): every record planned,
    and nothing left that a later trigger could read, again or for the first time."""

    def settled() -> bool:
        last = query.recentProgress[-2:]
        return len(last) == 2 and all(
            "addBatch" not in progress["durationMs"]
            and offset_total(source["endOffset"]) == log_end
            and offset_total(source["latestOffset"]) == log_end
            for progress in last
            for source in progress["sources"]
        )

    wait_until(settled, lambda: f"never settled at {log_end}: {query.lastProgress}", query=query)


def _subscription(kind: str, topic: str) -> dict[str, str]:
    if kind == "subscribe":
        return {"subscribe": topic}
    if kind == "subscribePattern":
        return {"subscribePattern": topic}  # a pattern that matches this topic only
    return {"assign": json.dumps({topic: [0, 1]})}


def _source_offsets(checkpoint: Path, topic: str) -> list[dict[str, int]]:
    """The source's end offset of every batch in Spark's offset log, in batch order."""
    offsets = checkpoint / "offsets"
    batches = sorted((int(p.name), p) for p in offsets.iterdir() if p.name.isdigit())
    return [json.loads(p.read_text().splitlines()[-1]).get(topic, {}) for _, p in batches]


@pytest.mark.parametrize(
    ("kind", "fail_on_data_loss"),
    [("subscribe", "true"), ("subscribePattern", "false"), ("assign", "false")],
)
def test_one_unknown_answer_neither_loses_nor_duplicates(
    source_spark: SparkSession,
    kafka: KafkaCluster,
    topic_factory,
    checkpoint: Path,
    tmp_path: Path,
    kind: str,
    fail_on_data_loss: str,
) -> None:
    bootstrap, topic = kafka.bootstrap_servers, topic_factory(partitions=2)
    source_spark.dataSource.register(LyingKafkaSource)
    driver_lie, task_lie = tmp_path / "driver-lie", tmp_path / "task-lie"
    options = {
        "kafka.bootstrap.servers": bootstrap,
        **_subscription(kind, topic),
        "startingOffsets": "earliest",
        "failOnDataLoss": fail_on_data_loss,
        "lie.topic": topic,
        "lie.driver": str(driver_lie),
        "lie.task": str(task_lie),
    }
    sink = Batches()
    with every_trigger_reported(source_spark):
        query = start_stream(
            source_spark,
            options,
            checkpoint,
            sink,
            available_now=False,
            source_format="kafka-eos-lying",
        )
    try:
        produce(bootstrap, topic, range(0, 300, 2), partition=0)
        produce(bootstrap, topic, range(1, 300, 2), partition=1)
        _wait_for(query, sink, set(range(300)))

        # The next trigger's listing on the driver lies about the topic.
        driver_lie.touch()
        _wait_until_claimed(query, driver_lie)
        produce(bootstrap, topic, range(300, 600, 2), partition=0)
        produce(bootstrap, topic, range(301, 600, 2), partition=1)
        _wait_for(query, sink, set(range(600)))

        # The next task to read sees "unknown topic or partition" between its records, then
        # one metadata answer calling the topic unknown.
        task_lie.touch()
        produce(bootstrap, topic, range(600, 1000, 2), partition=0)
        produce(bootstrap, topic, range(601, 1000, 2), partition=1)
        _wait_until_claimed(query, task_lie)
        _wait_for(query, sink, set(range(1000)))
        # A record read twice would arrive in a later batch: wait until the query has
        # planned every offset and triggers find nothing more to read.
        _wait_until_settled(query, 1000)
    finally:
        query.stop()

    driver_lies, task_lies = told(str(driver_lie)), told(str(task_lie))
    assert len(driver_lies) == 1, driver_lies
    # The trigger's own lookup lied (by name, or a listing with subscribePattern).
    assert ("listing" in driver_lies[0]) == (kind == "subscribePattern"), driver_lies
    assert len(task_lies) == 2, task_lies  # the error between records, one metadata answer
    assert sink.counts() == Counter(range(1000))
    assert not sink.differing_replays
    # Every batch planned the topic's partitions, and none went back (to 0 or anywhere).
    ends = _source_offsets(checkpoint, topic)
    assert all(set(end) == {"0", "1"} for end in ends), ends
    for earlier, later in pairwise(ends):
        assert all(later[p] >= earlier[p] for p in later), (earlier, later)
