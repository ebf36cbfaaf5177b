"""``startingOffsets=latest`` is pinned durably: records produced after the query started are
delivered exactly once, also when the query fails in batch 0 or batch 1 and restarts.

Faults injected: records produced continuously while the query starts (Spark asks the source
for its initial offset more than once before batch 0 runs); the sink crashes in batch 0 (the
batch that pins the start) or in batch 1, and the query restarts from its checkpoint while
records keep arriving. A start re-resolved at the replay of batch 0 would skip records, or
fail with a false "went back" data loss.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from pyspark.sql import SparkSession

from integration_tests.source.conftest import (
    QUERY_TIMEOUT_S,
    Batches,
    run_to_failure,
    start_stream,
    wait_until,
)
from kafka_eos.cluster import KafkaCluster

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

_BURST = 10


class _Producing:
    """Produces keys 0, 1, 2, ... to partition 0 in small flushed bursts until stopped; the
    topic is new and the producer idempotent, so key k lands at offset k."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self._producer = Producer(
            {"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True}
        )
        self._topic = topic
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self.count = 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                for key in range(self.count, self.count + _BURST):
                    text = str(key).encode()
                    self._producer.produce(self._topic, key=text, value=text, partition=0)
                assert self._producer.flush(30) == 0
                self.count += _BURST
                time.sleep(0.02)
        except BaseException as exc:  # re-raised by stop() in the test's thread
            self._error = exc

    def wait_for(self, count: int) -> None:
        """Wait until at least ``count`` records were produced (acknowledged)."""
        deadline = time.monotonic() + QUERY_TIMEOUT_S
        while self.count < count:
            assert self._error is None, f"producing failed: {self._error}"
            assert time.monotonic() < deadline, f"only {self.count} of {count} records produced"
            time.sleep(0.05)

    def stop(self) -> int:
        """Stop producing; the number of records produced."""
        self._stop.set()
        self._thread.join(60)
        if self._error is not None:
            raise self._error
        return self.count


def _options(bootstrap: str, topic: str) -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": bootstrap,
        "subscribe": topic,
        "startingOffsets": "latest",
        "maxOffsetsPerTrigger": "400",
    }


def _pinned_start(checkpoint: Path, topic: str) -> int:
    """Batch 0's end in Spark's offset log: where "latest" was pinned."""
    lines = (checkpoint / "offsets" / "0").read_text().splitlines()
    return json.loads(lines[-1])[topic]["0"]


def _wait_for_batches(sink: Batches, count: int) -> None:
    wait_until(lambda: len(sink.by_id) >= count, lambda: f"only batches {sorted(sink.by_id)} ran")


def _wait_for_key(sink: Batches, last: int) -> None:
    wait_until(lambda: last in sink.counts(), f"key {last} never delivered")


def test_records_produced_while_the_query_starts_are_not_skipped(
    source_spark: SparkSession, kafka: KafkaCluster, topic_factory, checkpoint: Path
) -> None:
    bootstrap, topic = kafka.bootstrap_servers, topic_factory(partitions=1)
    producing = _Producing(bootstrap, topic)
    producing.wait_for(_BURST)  # "latest" is then past 0, whenever Spark asks
    sink = Batches()
    query = start_stream(
        source_spark, _options(bootstrap, topic), checkpoint, sink, available_now=False
    )
    try:
        _wait_for_batches(sink, 3)
        produced = producing.stop()
        _wait_for_key(sink, produced - 1)
    finally:
        producing.stop()
        query.stop()
    assert sink.by_id[0] == [], "batch 0 only pins the start"
    pinned = _pinned_start(checkpoint, topic)
    assert 0 < pinned < produced
    sink.assert_exactly_once(range(pinned, produced))


@pytest.mark.parametrize("crash_in", [0, 1])
def test_crash_in_an_early_batch_restarts_from_the_pinned_start(
    source_spark: SparkSession, kafka: KafkaCluster, topic_factory, checkpoint: Path, crash_in: int
) -> None:
    bootstrap, topic = kafka.bootstrap_servers, topic_factory(partitions=1)
    options = _options(bootstrap, topic)
    producing = _Producing(bootstrap, topic)
    try:
        producing.wait_for(_BURST)  # "latest" is then past 0, whenever Spark asks
        sink = Batches(fail_at=crash_in)
        error = run_to_failure(
            start_stream(source_spark, options, checkpoint, sink, available_now=False)
        )
        assert f"injected crash in the middle of batch {crash_in}" in error
        # Records arrive while the query is down: two more bursts, so that at least one was
        # begun after the query stopped, however slow the machine.
        producing.wait_for(producing.count + 2 * _BURST)
        query = start_stream(source_spark, options, checkpoint, sink, available_now=False)
        try:
            _wait_for_batches(sink, crash_in + 3)
            produced = producing.stop()
            _wait_for_key(sink, produced - 1)
        finally:
            query.stop()
    finally:
        producing.stop()
    pinned = _pinned_start(checkpoint, topic)
    assert 0 < pinned < produced
    sink.assert_exactly_once(range(pinned, produced))
