"""A worker's pooled range-reader consumers on real Kafka (issue 13, finding 5), without Spark.

A pooled consumer must read each range exactly as a new one would: whatever the range before
it was (ahead, behind, overlapping, to the log end), however it ended (whole, stopped early),
and under ``read_committed`` with a transaction in the log. A read that failed must not hand
its consumer on, reads of other configurations must not share one (the partitions of one
configuration do: a consumer is given back unassigned), and a
consumer given back must stop fetching: what it fetches past its range's end is capped.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, Producer

from connectors.kafka.client_pool import ConsumerPool
from connectors.kafka.source import range_reader
from connectors.kafka.source.errors import DataLossError
from connectors.kafka.source.ranges import OffsetRange
from integration_tests.source.conftest import (
    delete_records_below,
    offsets_of,
    produce,
    range_batches,
    transaction,
)
from kafka_eos.cluster import KafkaCluster

pytestmark = [pytest.mark.kafka]


class Opened:
    """The range consumers ``read_range`` opens (each a real one; not the clients a range
    opens to ask for watermarks or metadata, which are not pooled)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, **extra: object) -> None:
        self.consumers: list[Any] = []
        real = range_reader.open_consumer

        def opening(options: object, group_id: str, **settings: object) -> Any:
            if "enable.partition.eof" not in settings:
                return real(options, group_id, **settings)
            consumer = real(options, group_id, **settings, **extra)
            self.consumers.append(consumer)
            return consumer

        monkeypatch.setattr(range_reader, "open_consumer", opening)

    def __len__(self) -> int:
        return len(self.consumers)


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> Opened:
    return Opened(monkeypatch)


@pytest.fixture
def pool() -> Iterator[ConsumerPool]:
    """A worker's pool of range consumers, closed when the test ends."""
    consumers = ConsumerPool()
    yield consumers
    consumers.close()


@pytest.fixture
def truncated(kafka: KafkaCluster, topic_factory) -> tuple[str, str]:
    """``(bootstrap, topic)``: one partition of offsets 0-199, the records below 100 deleted."""
    bootstrap, topic = kafka.bootstrap_servers, topic_factory(partitions=1)
    produce(bootstrap, topic, range(200), partition=0)
    delete_records_below(bootstrap, topic, 100)
    return bootstrap, topic


def ranges(
    bootstrap: str, topic: str, pool: ConsumerPool, *, group: str | None = None, **extra: str
) -> Callable[..., Iterator[pa.RecordBatch]]:
    """``batches(start, end, partition=0)``: the batches of ``read_range`` through ``pool``,
    as a task's iterator (Spark may close it early)."""
    options = {"kafka.bootstrap.servers": bootstrap, "subscribe": topic, **extra}
    group_id = group or f"g-{uuid.uuid4()}"

    def batches(start: int, end: int, partition: int = 0) -> Iterator[pa.RecordBatch]:
        piece = OffsetRange(topic, partition, start, end)
        return range_batches(options, piece, group_id=group_id, pool=pool)

    return batches


def reader(
    bootstrap: str, topic: str, pool: ConsumerPool, *, group: str | None = None, **extra: str
) -> Callable[..., list[int]]:
    """``read(start, end, partition=0)``: the offsets ``read_range`` returns, through ``pool``."""
    batches = ranges(bootstrap, topic, pool, group=group, **extra)

    def read(start: int, end: int, partition: int = 0) -> list[int]:
        return offsets_of(batches(start, end, partition))

    return read


def test_one_consumer_reads_every_range_whatever_came_before(
    kafka: KafkaCluster, topic_factory, opened: Opened, pool: ConsumerPool
) -> None:
    """Ranges ahead of, behind and inside the one before, and ranges to the log end (where
    the consumer has fetched past the range end and queued an end-of-partition event)."""
    bootstrap, topic = kafka.bootstrap_servers, topic_factory(partitions=1)
    produce(bootstrap, topic, range(300), partition=0)
    read = reader(bootstrap, topic, pool)
    for start, end in [(0, 300), (50, 150), (0, 10), (290, 300), (100, 200), (0, 300), (5, 6)]:
        assert read(start, end) == list(range(start, end)), (start, end)
    assert len(opened) == 1
    assert len(pool) == 1


def test_under_read_committed_a_pooled_consumer_skips_aborted_records_and_markers(
    kafka: KafkaCluster, topic_factory, opened: Opened, pool: ConsumerPool
) -> None:
    """Offsets 0-9 committed (marker 10), 11-20 aborted (marker 21), 22-31 committed (marker
    32): every range gives exactly its committed offsets, those ending in aborted records too.
    """
    bootstrap, topic = kafka.bootstrap_servers, topic_factory(partitions=1)
    transaction(bootstrap, topic, range(10), commit=True, partition=0)
    transaction(bootstrap, topic, range(10, 20), commit=False, partition=0)
    transaction(bootstrap, topic, range(20, 30), commit=True, partition=0)
    committed = [*range(0, 10), *range(22, 32)]
    read = reader(bootstrap, topic, pool, **{"kafka.isolation.level": "read_committed"})
    for start, end in [(0, 33), (5, 21), (0, 33), (11, 25), (15, 22), (25, 33), (0, 10)]:
        assert read(start, end) == [o for o in committed if start <= o < end], (start, end)
    assert len(opened) == 1


def test_a_read_stopped_early_gives_its_consumer_back_for_a_whole_next_read(
    kafka: KafkaCluster,
    topic_factory,
    monkeypatch: pytest.MonkeyPatch,
    opened: Opened,
    pool: ConsumerPool,
) -> None:
    bootstrap, topic = kafka.bootstrap_servers, topic_factory(partitions=1)
    produce(bootstrap, topic, range(300), partition=0)
    monkeypatch.setattr(range_reader, "_BATCH_ROWS", 50)
    group = f"g-{uuid.uuid4()}"
    batches = ranges(bootstrap, topic, pool, group=group)(0, 300)
    first: pa.RecordBatch = next(batches)
    assert first.column("offset").to_pylist()[0] == 0
    batches.close()  # Spark closes the iterator of a task that stops early (a limit)
    assert len(pool) == 1
    assert reader(bootstrap, topic, pool, group=group)(0, 300) == list(range(300))
    assert len(opened) == 1


def test_a_failed_read_closes_its_consumer_instead_of_handing_it_on(
    truncated: tuple[str, str], opened: Opened, pool: ConsumerPool
) -> None:
    bootstrap, topic = truncated
    read = reader(bootstrap, topic, pool, group="g-failing", failOnDataLoss="true")
    with pytest.raises(DataLossError, match=r"offsets \[0, 100\)"):
        read(0, 200)
    assert len(pool) == 0
    assert read(100, 200) == list(range(100, 200))
    assert len(opened) == 2


def test_other_configurations_get_their_own_consumers_and_partitions_share_one(
    kafka: KafkaCluster, topic_factory, opened: Opened, pool: ConsumerPool
) -> None:
    bootstrap, topic = kafka.bootstrap_servers, topic_factory(partitions=2)
    produce(bootstrap, topic, range(10), partition=0)
    produce(bootstrap, topic, range(20), partition=1)  # longer: a read of 0 would not end
    committed = reader(bootstrap, topic, pool, group="g-same")
    uncommitted = reader(
        bootstrap, topic, pool, group="g-same", **{"kafka.isolation.level": "read_uncommitted"}
    )
    other_group = reader(bootstrap, topic, pool, group="g-other")
    for _ in range(2):
        assert committed(0, 10) == list(range(10))
        assert committed(0, 20, partition=1) == list(range(20))
        assert committed(3, 7) == list(range(3, 7))  # partition 0 again, after partition 1
        assert uncommitted(0, 10) == list(range(10))
        assert other_group(0, 10) == list(range(10))
    assert len(opened) == 3  # one per configuration: the partitions shared it
    assert len(pool) == 3


def test_a_consumer_given_back_fetches_nothing_past_its_range(
    kafka: KafkaCluster, topic_factory, monkeypatch: pytest.MonkeyPatch, pool: ConsumerPool
) -> None:
    """A 100-record range of a 20 MB partition: a consumer left assigned would go on
    prefetching (librdkafka queues up to 64 MB) to the partition's end; given back unassigned,
    it fetches nothing more once what was in flight at the range's end has arrived. How much
    was in flight depends on how long the range took (a fetch of ``max.partition.fetch.bytes``,
    1 MiB, every few ms on a loaded machine), so the check is that the count stops growing."""
    bootstrap, topic = kafka.bootstrap_servers, topic_factory(partitions=1)
    produce_large(bootstrap, topic, records=20_000, size=1000)
    received: list[int] = []

    def stats(text: str) -> None:
        received.append(json.loads(text)["rxmsg_bytes"])

    opened = Opened(monkeypatch, **{"statistics.interval.ms": 100, "stats_cb": stats})
    assert reader(bootstrap, topic, pool)(0, 100) == list(range(100))
    [consumer] = opened.consumers
    assert len(pool) == 1
    settled = serve_statistics(consumer, seconds=1.0, received=received)
    later = serve_statistics(consumer, seconds=2.0, received=received)
    assert later == settled, f"fetched {later - settled} bytes after the range was given back"
    assert later < 20_000 * 1000, f"fetched {later} bytes: the whole partition, for 100 records"


def serve_statistics(consumer: Consumer, *, seconds: float, received: list[int]) -> int:
    """Poll the unassigned consumer for ``seconds`` (that serves its statistics callback) and
    return the bytes it had received by the last report."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        consumer.poll(0.1)
    assert received, "no statistics"
    return received[-1]


def produce_large(bootstrap: str, topic: str, *, records: int, size: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for n in range(records):
        producer.produce(topic, key=str(n).encode(), value=b"x" * size, partition=0)
        if n % 5000 == 0:
            producer.flush(60)
    assert producer.flush(60) == 0


def test_a_consumer_that_saw_a_loss_is_closed_not_kept(
    truncated: tuple[str, str], opened: Opened, pool: ConsumerPool
) -> None:
    """With failOnDataLoss=false the read goes on past the loss; its consumer may hold
    metadata of the log that was (a recreated topic's leader epoch), so it is not kept."""
    bootstrap, topic = truncated
    read = reader(bootstrap, topic, pool, group="g-lossy", failOnDataLoss="false")
    assert read(0, 200) == list(range(100, 200))
    assert len(pool) == 0
    assert read(100, 200) == list(range(100, 200))
    assert len(opened) == 2 and len(pool) == 1


def test_no_fetching_while_spark_holds_the_last_batch(
    kafka: KafkaCluster, topic_factory, monkeypatch: pytest.MonkeyPatch, pool: ConsumerPool
) -> None:
    """A range to the log end: while its last batch waits for Spark, the consumer would sit
    at the log end asking every fetch.wait.max.ms (5 ms); the range is unassigned first."""
    bootstrap, topic = kafka.bootstrap_servers, topic_factory(partitions=1)
    produce(bootstrap, topic, range(100), partition=0)
    fetches: list[int] = []

    def stats(text: str) -> None:
        brokers = json.loads(text)["brokers"].values()
        fetches.append(sum(broker["req"].get("Fetch", 0) for broker in brokers))

    settings = {"statistics.interval.ms": 100, "stats_cb": stats}
    opened = Opened(monkeypatch, **settings)
    batches = ranges(bootstrap, topic, pool)(0, 100)
    assert next(batches).num_rows == 100  # the last batch, held: Spark is busy with it
    [consumer] = opened.consumers
    consumer.poll(0.5)  # serves the statistics callback; the range is unassigned
    held_from = fetches[-1]
    consumer.poll(1.0)
    assert fetches[-1] - held_from < 20, f"{fetches[-1] - held_from} fetches in 1 s"
    assert list(batches) == []
