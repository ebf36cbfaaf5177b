"""Timestamp starts under read_committed (issue 13, finding 7).

Kafka answers ListOffsets for a timestamp under READ_COMMITTED with "no offset" (-1) when the
first offset whose timestamp is at or after it lies at or beyond the last stable offset (LSO),
even though the record exists (``test_broker_hides_a_match_at_or_beyond_the_lso``). The source
therefore looks timestamps up with READ_UNCOMMITTED semantics: the start is the first offset
whose timestamp is at or after the one given, committed or not; a start beyond the LSO waits
there until the transactions before it end. Only a partition with no such record up to the
high watermark follows ``startingOffsetsByTimestampStrategy``.

One Kafka version suffices (the selected one, 4.3.1 by default): the ListOffsets rule checked
here (answers capped at the LSO under READ_COMMITTED, at the high watermark under
READ_UNCOMMITTED) has been the same since transactions came in Kafka 0.11, and transactions
V2 in 4.x changes EndTxn, not the LSO or ListOffsets; the first test checks the rule itself on
the version run, so a broker that answered otherwise would fail it rather than pass silently.

Partition 0: committed records 0-4 with timestamps before T, then an open transaction with
records 100-102 at T and later: the first match is the LSO itself.
Partition 1: an open transaction with records 200-201 before T, committed (plain) records
10-11 before T, then plain records 12-13 at T: the first match lies beyond the LSO, and the
records between the LSO and it (200, 201, 10, 11) are before T and must not be read.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from pyspark.sql import SparkSession

from integration_tests.source.conftest import (
    QUERY_TIMEOUT_S,
    Batches,
    batch_frame,
    every_trigger_reported,
    keys_of,
    run_to_failure,
    start_stream,
)
from kafka_eos.cluster import KafkaCluster

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

T = int(time.time() * 1000) - 3_600_000  # an hour ago: well inside any retention
BEFORE = [T - 60_000 + i * 1000 for i in range(5)]  # t0..t1, all before T
COMMITTED_0, OPEN_0 = [0, 1, 2, 3, 4], [100, 101, 102]
OPEN_1, BEFORE_1, AT_OR_AFTER_1 = [200, 201], [10, 11], [12, 13]
# Offsets: partition 0 holds 0-4 [0-4] and the open transaction [5-7]: LSO 5, first match 5.
# Partition 1 holds the open transaction [0-1], 10-11 [2-3] and 12-13 [4-5]: LSO 0, match 4.
LSO = {0: 5, 1: 0}
FIRST_MATCH = {0: 5, 1: 4}


def _produce(producer: Producer, topic: str, partition: int, keys: Iterable[int], stamps) -> None:
    for key, stamp in zip(keys, stamps, strict=True):
        text = str(key).encode()
        producer.produce(topic, key=text, value=text, partition=partition, timestamp=stamp)
    assert producer.flush(30) == 0


def _open_transaction(bootstrap: str, topic: str, partition: int, keys, stamps) -> Producer:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"ts-{uuid.uuid4().hex}"}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    _produce(producer, topic, partition, keys, stamps)
    return producer


@pytest.fixture
def timed_topic(kafka: KafkaCluster, topic_factory) -> Iterator[tuple[str, list[Producer]]]:
    bootstrap, topic = kafka.bootstrap_servers, topic_factory(partitions=2)
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    _produce(plain, topic, 0, COMMITTED_0, BEFORE)
    open_0 = _open_transaction(bootstrap, topic, 0, OPEN_0, [T, T, T + 1000])
    open_1 = _open_transaction(bootstrap, topic, 1, OPEN_1, BEFORE[:2])
    _produce(plain, topic, 1, BEFORE_1, BEFORE[2:4])
    _produce(plain, topic, 1, AT_OR_AFTER_1, [T, T + 2000])
    try:
        yield topic, [open_0, open_1]
    finally:
        for producer in (open_0, open_1):
            with contextlib.suppress(KafkaException):
                producer.abort_transaction(30)


def _offsets_for(bootstrap: str, topic: str, stamp: int, isolation: str) -> dict[int, int]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "ts-check", "isolation.level": isolation}
    )
    try:
        request = [TopicPartition(topic, p, stamp) for p in (0, 1)]
        return {tp.partition: tp.offset for tp in consumer.offsets_for_times(request, 30)}
    finally:
        consumer.close()


def test_broker_hides_a_match_at_or_beyond_the_lso(kafka: KafkaCluster, timed_topic) -> None:
    """The broker behaviour the fix rests on, checked on the version run."""
    topic, _ = timed_topic
    bootstrap = kafka.bootstrap_servers
    assert _offsets_for(bootstrap, topic, T, "read_committed") == {0: -1, 1: -1}
    assert _offsets_for(bootstrap, topic, T, "read_uncommitted") == FIRST_MATCH
    assert _offsets_for(bootstrap, topic, -1, "read_committed") == LSO


def test_stream_from_a_timestamp_in_open_transactions_reads_them_once_committed(
    source_spark: SparkSession, kafka: KafkaCluster, timed_topic, checkpoint: Path
) -> None:
    topic, (open_0, open_1) = timed_topic
    options = {
        "kafka.bootstrap.servers": kafka.bootstrap_servers,
        "subscribe": topic,
        "startingTimestamp": str(T),  # startingOffsetsByTimestampStrategy: error (default)
    }
    sink = Batches()
    with every_trigger_reported(source_spark):
        query = start_stream(source_spark, options, checkpoint, sink, available_now=False)
    try:
        # Several triggers while both transactions are open: the query waits, it does not fail.
        deadline = time.monotonic() + QUERY_TIMEOUT_S
        while len(query.recentProgress) < 4 and query.isActive:
            assert time.monotonic() < deadline, "the query ran no triggers"
            time.sleep(0.2)
        assert query.exception() is None, f"query failed: {query.exception()}"
        assert query.isActive
        assert sink.counts() == {}, "read past an open transaction"

        open_0.commit_transaction(30)
        open_1.commit_transaction(30)
        expected = OPEN_0 + AT_OR_AFTER_1
        while set(sink.counts()) != set(expected):
            assert query.exception() is None, f"query failed: {query.exception()}"
            assert time.monotonic() < deadline, f"only {sorted(sink.counts())} were read"
            time.sleep(0.2)
        query.processAllAvailable()
        sink.assert_exactly_once(expected)
    finally:
        query.stop()


def test_batch_read_from_a_timestamp_in_open_transactions(
    source_spark: SparkSession, kafka: KafkaCluster, timed_topic
) -> None:
    """A batch read ends at the LSO: while the transactions are open it reads nothing (no
    failure, no record before T); once they commit, exactly the records at or after T."""
    topic, (open_0, open_1) = timed_topic
    bootstrap, start = kafka.bootstrap_servers, {"startingTimestamp": str(T)}
    assert keys_of(batch_frame(source_spark, bootstrap, topic, **start)) == []
    open_0.commit_transaction(30)
    open_1.commit_transaction(30)
    assert keys_of(batch_frame(source_spark, bootstrap, topic, **start)) == sorted(
        OPEN_0 + AT_OR_AFTER_1
    )


def test_no_record_at_or_after_the_timestamp_follows_the_strategy(
    source_spark: SparkSession, kafka: KafkaCluster, timed_topic, checkpoint: Path
) -> None:
    """Beyond every record, open ones included, the default strategy still fails, naming the
    option."""
    topic, _ = timed_topic
    options = {
        "kafka.bootstrap.servers": kafka.bootstrap_servers,
        "subscribe": topic,
        "startingTimestamp": str(T + 10_000),
    }
    error = run_to_failure(start_stream(source_spark, options, checkpoint, Batches()))
    assert "startingTimestamp" in error
    assert "no record of these partitions has a timestamp at or after" in error
