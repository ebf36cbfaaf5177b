"""A range whose tail is aborted records, with their abort marker past the last stable offset.

One partition holds, in this order (offsets in brackets): committed 0-2 [0-2, marker 3], the
records 100-104 of transaction A [4-8], the record 200 of transaction B [9], A's abort marker
[10]. B is still open, so the last stable offset (LSO) is 9 and the high watermark 11: a read
of ``[0, 9)`` ends in A's aborted records, and their marker lies past the LSO. This is the
shape of the sink's own output: tasks hold transactions open until the driver commits, and a
failed task's transaction is aborted meanwhile.

librdkafka drops aborted records without moving the consumer's position, which stays at 4, and
delivers the marker only once B has ended: a reader that ends a range by position alone waits
for B (issue 13, finding 1). Here B's transaction timeout and the read's
``kafkaConsumer.pollTimeoutMs`` are 10 minutes, so such a reader would wait 10 minutes. The test
allows ``PROMPT_S``; past it, the test aborts B itself, which ends the wait, and fails.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer
from pyspark.sql import SparkSession

from integration_tests.conftest import create_topic
from integration_tests.kafka_fixtures import ClusterPool
from integration_tests.source.conftest import (
    Batches,
    batch_frame,
    keys_of,
    latest_offsets,
    options_for,
    run_to_end,
    start_stream,
    transaction,
)
from kafka_eos.cluster import KafkaCluster
from kafka_eos.cluster.base import PROTOCOL_KAFKA_VERSIONS
from kafka_eos.operations.drain import drain

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

COMMITTED = [0, 1, 2]
ABORTED = [100, 101, 102, 103, 104]
OPEN = [200]
LSO, HIGH_WATERMARK = 9, 11
TEN_MINUTES_MS = "600000"
# A fixed reader ends in seconds; one that waits for B would wait 10 minutes.
PROMPT_S = 90.0
# After the test aborts B, how long a stalled read may take to end.
UNBLOCKED_S = 120.0


@pytest.fixture(scope="module", params=PROTOCOL_KAFKA_VERSIONS, ids=lambda v: f"kafka-{v}")
def versioned_cluster(request: pytest.FixtureRequest, kafka_clusters: ClusterPool) -> KafkaCluster:
    return kafka_clusters.get(request.param)


@pytest.fixture
def aborted_tail(versioned_cluster: KafkaCluster) -> Iterator[tuple[str, str, Producer]]:
    """The partition above: bootstrap servers, topic, and B's producer (B still open)."""
    bootstrap = versioned_cluster.bootstrap_servers
    topic = create_topic(bootstrap)
    transaction(bootstrap, topic, COMMITTED, commit=True, partition=0)
    a = transaction(bootstrap, topic, ABORTED, commit=None, partition=0)
    b = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"src-{uuid.uuid4().hex}",
            "transaction.timeout.ms": TEN_MINUTES_MS,
        }
    )
    try:
        b.init_transactions(30)
        b.begin_transaction()
        for key in OPEN:
            b.produce(topic, key=str(key).encode(), value=str(key).encode(), partition=0)
        assert b.flush(30) == 0
        a.abort_transaction(30)
        _assert_offsets(bootstrap, topic)
        yield bootstrap, topic, b
    finally:
        # After the test has aborted B, this is a state error.
        with contextlib.suppress(KafkaException):
            b.abort_transaction(30)


def _assert_offsets(bootstrap: str, topic: str) -> None:
    """The set-up has the shape above: A's marker (10) lies past the LSO (9)."""
    for isolation, expected in (("read_committed", LSO), ("read_uncommitted", HIGH_WATERMARK)):
        assert latest_offsets(bootstrap, topic, isolation) == {(topic, 0): expected}, isolation


def _promptly(action: Callable[[], None], unblock: Callable[[], None]) -> float:
    """Run ``action``; its duration if it ends within ``PROMPT_S``. Otherwise ``unblock`` it
    (abort B), let it end, and fail."""
    failure: list[BaseException] = []

    def run() -> None:
        try:
            action()
        except BaseException as exc:  # re-raised in the test's thread
            failure.append(exc)

    began = time.monotonic()
    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(PROMPT_S)
    elapsed = time.monotonic() - began
    if worker.is_alive():
        unblock()
        worker.join(UNBLOCKED_S)
        pytest.fail(
            f"the read did not end within {PROMPT_S:.0f} s: it waited for the unrelated "
            f"transaction B, and ended {time.monotonic() - began:.1f} s after it began, once "
            "the test aborted B"
        )
    if failure:
        raise failure[0]
    return elapsed


def test_batch_read_ends_without_waiting_for_the_open_transaction(
    source_spark: SparkSession, aborted_tail: tuple[str, str, Producer]
) -> None:
    bootstrap, topic, b = aborted_tail
    frame = batch_frame(
        source_spark,
        bootstrap,
        topic,
        endingOffsets="latest",
        **{"kafkaConsumer.pollTimeoutMs": TEN_MINUTES_MS},
    )
    read: list[list[int]] = []
    elapsed = _promptly(lambda: read.append(keys_of(frame)), b.abort_transaction)
    print(f"batch read of [0, {LSO}) took {elapsed:.1f} s")
    assert read == [COMMITTED]


def test_micro_batch_ends_without_waiting_for_the_open_transaction(
    source_spark: SparkSession, aborted_tail: tuple[str, str, Producer], checkpoint: Path
) -> None:
    bootstrap, topic, b = aborted_tail
    options = options_for(bootstrap, topic, **{"kafkaConsumer.pollTimeoutMs": TEN_MINUTES_MS})
    sink = Batches()
    query = start_stream(source_spark, options, checkpoint, sink)
    try:
        elapsed = _promptly(lambda: run_to_end(query), b.abort_transaction)
    finally:
        query.stop()
    print(f"micro-batch of [0, {LSO}) took {elapsed:.1f} s")
    assert query.lastProgress["sources"][0]["endOffset"] == f'{{"{topic}": {{"0": {LSO}}}}}'
    sink.assert_exactly_once(COMMITTED)


def test_a_drain_ends_without_waiting_for_the_open_transaction(
    aborted_tail: tuple[str, str, Producer],
) -> None:
    """What ``kafka-eos verify`` and the tests' counts read with: the same tail, no Spark."""
    bootstrap, topic, b = aborted_tail
    drained: list[list[int]] = []
    elapsed = _promptly(
        lambda: drained.append(
            [int(r.value or b"-1") for r in drain(bootstrap, topic, timeout_s=600)]
        ),
        b.abort_transaction,
    )
    print(f"drain of [0, {LSO}) took {elapsed:.1f} s")
    assert drained == [COMMITTED]
