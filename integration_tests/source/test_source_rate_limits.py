"""Admission control: maxOffsetsPerTrigger caps every batch, minOffsetsPerTrigger with
maxTriggerDelay holds batches back, and Trigger.AvailableNow stops at the end it saw first."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.streaming.listener import StreamingQueryProgress

from connectors.spark.lag import KafkaLagListener, OffsetsBehindLatest, offsets_behind_latest
from integration_tests.source.conftest import (
    Batches,
    every_trigger_reported,
    offset_total,
    options_for,
    produce,
    run_to_end,
    start_stream,
    wait_until,
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
    lag = _SeenLag()  # Spark's lag metrics, as the shipped listener logs them
    source_spark.streams.addListener(lag)
    try:
        query = start_stream(
            source_spark, options_for(bootstrap, topic, maxOffsetsPerTrigger="40"), checkpoint, sink
        )
        run_to_end(query)
        wait_until(lambda: len(lag.seen) >= 8, "the listener's 8 progress events")
    finally:
        source_spark.streams.removeListener(lag)
    sizes = [len(sink.by_id[batch]) for batch in sorted(sink.by_id)]
    assert sizes == [40] * 7 + [20]
    assert [p["numInputRows"] for p in query.recentProgress] == sizes
    # 300 offsets, 40 a batch: the first batch leaves 260 behind; the last, none.
    [first], *_, [last] = lag.seen
    assert round(first.avg * 3) == 260 and last == OffsetsBehindLatest(0, 0, 0.0)
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
    """Held by the count of triggers that ran no batch, never by a sleep: first with a delay no
    test outlasts, so that only minOffsetsPerTrigger can admit a batch; then, restarted, with
    a short delay that admits fewer offsets, no sooner than the delay after the last admitted
    trigger (as the trigger times Spark reports show)."""
    bootstrap, topic = kafka.bootstrap_servers, topic_factory(partitions=2)
    sink = Batches()
    options = options_for(bootstrap, topic, minOffsetsPerTrigger="100", maxTriggerDelay="1h")
    query = _start_reporting_every_trigger(source_spark, options, checkpoint, sink)
    try:
        _wait(query, lambda: query.recentProgress, "the first trigger (admitted, as always)")
        produce(bootstrap, topic, range(30))
        _wait(query, lambda: _held(query).count(30) >= 3, "3 triggers that held back 30 offsets")
        assert sink.counts() == {}, "30 < minOffsetsPerTrigger offsets made a batch"
        # Spark's lag metrics, as connectors.spark.lag derives them from this progress.
        [behind, *_] = [
            offsets_behind_latest(source["endOffset"], source["latestOffset"])
            for progress in query.recentProgress
            if "addBatch" not in progress["durationMs"]
            for source in progress["sources"]
            if offset_total(source["latestOffset"]) - offset_total(source["endOffset"]) == 30
        ]
        assert behind is not None and behind.avg == 15.0  # 30 offsets over 2 partitions
        produce(bootstrap, topic, range(30, 100))
        _wait(query, lambda: _progress_of(query, 100), "the progress of the batch of 100")
        # Stopped before Spark's commits/N, the restart would replay the batch, and its first
        # latestOffset (which starts the timer) would come a trigger later.
        batch = _progress_of(query, 100)
        assert batch is not None
        done = checkpoint / "commits" / str(batch["batchId"])
        _wait(query, done.exists, f"Spark's {done}")
    finally:
        query.stop()
    assert [keys for keys in sink.by_id.values() if keys] == [list(range(100))]

    delay_s = 3.0
    options = {**options, "maxTriggerDelay": f"{delay_s:.0f}s"}
    query = _start_reporting_every_trigger(source_spark, options, checkpoint, sink)
    try:
        _wait(query, lambda: query.recentProgress, "the first trigger after the restart")
        # Taken now: Spark keeps the last 100 progress reports, and triggers that hold back
        # offsets for 3 s can be more than that.
        first = query.recentProgress[0]
        assert first["numInputRows"] == 0, "the restart replayed a batch: the timer starts later"
        produce(bootstrap, topic, range(100, 130))
        _wait(query, lambda: _progress_of(query, 30), "the progress of the batch of 30")
        admitted = _progress_of(query, 30)
    finally:
        query.stop()
    sink.assert_exactly_once(range(130))
    assert [len(keys) for keys in sink.by_id.values() if keys] == [100, 30]
    # The delay's timer started at the restart's first trigger, at the earliest.
    assert admitted is not None
    assert _planned_by(admitted) - _started(first) >= delay_s - _CLOCK_SLACK_S


# Spark's progress times are whole milliseconds, each duration measured on its own.
_CLOCK_SLACK_S = 0.02
# The phases of a trigger that come after the source's latestOffset.
_AFTER_LATEST_OFFSET = ("walCommit", "getBatch", "queryPlanning", "addBatch", "commitOffsets")


def _start_reporting_every_trigger(
    spark: SparkSession, options: dict[str, str], checkpoint: Path, sink: Batches
) -> StreamingQuery:
    with every_trigger_reported(spark):
        return start_stream(spark, options, checkpoint, sink, available_now=False)


def _held(query: StreamingQuery) -> list[int]:
    """Per trigger that ran no batch, the offsets it saw available (latest less the end)."""
    return [
        offset_total(source["latestOffset"]) - offset_total(source["endOffset"])
        for progress in query.recentProgress
        if "addBatch" not in progress["durationMs"]
        for source in progress["sources"]
    ]


def _progress_of(query: StreamingQuery, rows: int) -> StreamingQueryProgress | None:
    """The progress of the trigger that read a batch of ``rows`` rows, if still kept."""
    return next((p for p in query.recentProgress if p["numInputRows"] == rows), None)


def _started(progress: StreamingQueryProgress) -> float:
    return datetime.fromisoformat(progress["timestamp"]).timestamp()


def _planned_by(progress: StreamingQueryProgress) -> float:
    """The latest time at which the trigger's latestOffset can have returned: its start plus
    its duration, less the phases that follow latestOffset."""
    durations = progress["durationMs"]
    after = sum(durations.get(phase, 0) for phase in _AFTER_LATEST_OFFSET)
    return _started(progress) + (durations["triggerExecution"] - after) / 1000


class _SeenLag(KafkaLagListener):
    """The listener as shipped, keeping every lag it logged."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[list[OffsetsBehindLatest]] = []  # per progress event

    def onQueryProgress(self, event: Any) -> None:
        super().onQueryProgress(event)
        self.seen.append(self.latest.get(str(event.progress.id), []))


def _wait(query: StreamingQuery, condition: Callable[[], object], what: str) -> None:
    wait_until(condition, f"timed out waiting for {what}", query=query)
