"""read_committed: ranges are planned up to the last stable offset (LSO) and read by position.

One partition holds, in this order (offsets in brackets):
plain 0-4 [0-4], committed 5-7 [5-7, marker 8], aborted 1000-1002 [9-11, marker 12],
committed 8-9 [13-14, marker 15], aborted 1003 [16, marker 17], an OPEN transaction
2000-2001 [18-19], plain 10-11 [20-21]. The LSO is 18; the high watermark 22.
Several planned ranges end on aborted records or markers, which a consumer never returns:
the reads must end at once, not wait out ``kafkaConsumer.pollTimeoutMs``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer
from pyspark.sql import SparkSession

from integration_tests.source.conftest import (
    Batches,
    batch_frame,
    keys_of,
    latest_offsets,
    options_for,
    produce,
    run_to_end,
    start_stream,
    transaction,
)
from kafka_eos.cluster import KafkaCluster

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

COMMITTED_BEFORE_OPEN = list(range(10))
ABORTED = [1000, 1001, 1002, 1003]
OPEN = [2000, 2001]
AFTER_OPEN = [10, 11]
LSO, HIGH_WATERMARK = 18, 22
# A range that waited for a record at its end would wait kafkaConsumer.pollTimeoutMs, and
# then fail: no read that waits can end within it, however slow the machine. The reads that
# do not wait end in seconds, so it bounds them generously.
POLL_TIMEOUT_MS = "120000"
PROMPT_S = int(POLL_TIMEOUT_MS) / 1000


@pytest.fixture
def mixed_topic(kafka: KafkaCluster, topic_factory) -> Iterator[tuple[str, Producer]]:
    bootstrap, topic = kafka.bootstrap_servers, topic_factory(partitions=1)
    produce(bootstrap, topic, range(5))
    transaction(bootstrap, topic, [5, 6, 7], commit=True)
    transaction(bootstrap, topic, ABORTED[:3], commit=False)
    transaction(bootstrap, topic, [8, 9], commit=True)
    transaction(bootstrap, topic, ABORTED[3:], commit=False)
    still_open = transaction(bootstrap, topic, OPEN, commit=None)
    produce(bootstrap, topic, AFTER_OPEN)
    try:
        yield topic, still_open
    finally:
        # Ends the transaction if a test left it open; after a commit it is a state error.
        with contextlib.suppress(KafkaException):
            still_open.abort_transaction(30)


def test_latest_is_the_last_stable_offset(kafka: KafkaCluster, mixed_topic) -> None:
    topic, _ = mixed_topic
    for isolation, expected in (("read_committed", LSO), ("read_uncommitted", HIGH_WATERMARK)):
        latest = latest_offsets(kafka.bootstrap_servers, topic, isolation)
        assert latest == {(topic, 0): expected}, isolation


def test_batch_read_ends_promptly_on_markers_and_aborted_records(
    source_spark: SparkSession, kafka: KafkaCluster, mixed_topic
) -> None:
    topic, _ = mixed_topic
    frame = batch_frame(
        source_spark,
        kafka.bootstrap_servers,
        topic,
        minPartitions="6",  # ranges [0,3) [3,6) [6,9) [9,12) [12,15) [15,18)
        **{"kafkaConsumer.pollTimeoutMs": POLL_TIMEOUT_MS},
    )
    began = time.monotonic()
    assert keys_of(frame) == COMMITTED_BEFORE_OPEN
    elapsed = time.monotonic() - began
    assert elapsed < PROMPT_S, f"the read took {elapsed:.1f} s: it waited for markers"


def test_read_uncommitted_sees_aborted_and_open_records(
    source_spark: SparkSession, kafka: KafkaCluster, mixed_topic
) -> None:
    topic, _ = mixed_topic
    isolation = {"kafka.isolation.level": "read_uncommitted"}
    frame = batch_frame(source_spark, kafka.bootstrap_servers, topic, **isolation)
    assert keys_of(frame) == sorted(COMMITTED_BEFORE_OPEN + ABORTED + OPEN + AFTER_OPEN)


def test_stream_waits_at_the_open_transaction_then_reads_it_once_committed(
    source_spark: SparkSession, kafka: KafkaCluster, mixed_topic, checkpoint: Path
) -> None:
    topic, still_open = mixed_topic
    options = options_for(
        kafka.bootstrap_servers,
        topic,
        minPartitions="6",
        **{"kafkaConsumer.pollTimeoutMs": POLL_TIMEOUT_MS},
    )
    sink = Batches()
    began = time.monotonic()
    query = start_stream(source_spark, options, checkpoint, sink)
    run_to_end(query)
    elapsed = time.monotonic() - began
    assert elapsed < PROMPT_S, f"the query took {elapsed:.1f} s: a read waited for markers"
    assert query.lastProgress["sources"][0]["endOffset"] == f'{{"{topic}": {{"0": {LSO}}}}}'
    sink.assert_exactly_once(COMMITTED_BEFORE_OPEN)

    still_open.commit_transaction(30)
    run_to_end(start_stream(source_spark, options, checkpoint, sink))
    sink.assert_exactly_once(COMMITTED_BEFORE_OPEN + OPEN + AFTER_OPEN)
