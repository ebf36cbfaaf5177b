"""A topic deleted while a task reads it is data loss, as ``failOnDataLoss`` says, and is
reported promptly instead of after ``kafkaConsumer.pollTimeoutMs`` as a plain error; so is a
topic deleted between two triggers, on the driver. Both only once the deletion is confirmed
(``confirmed_absent``): one answer saying "unknown" is not a deletion.

Faults injected: ``AdminClient.delete_topics`` while an executor's range reader waits at the
end of the records (its range ends beyond them; the deletion is made by its consumer, at the
first ``consume`` after the last record), or between two ``latestOffset`` calls of the stream
reader; and, for contrast, one lying "unknown" answer on a topic that stays. On real
Kafka; no Spark needed (``test_source_transient_unknown.py`` runs the lies through Spark).
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Message
from confluent_kafka.admin import ClusterMetadata
from pyspark.sql.streaming.datasource import ReadAllAvailable

from connectors.kafka.source import client as source_client
from connectors.kafka.source import range_reader
from connectors.kafka.source.client import confirmed_absent, open_consumer
from connectors.kafka.source.errors import DataLossError
from connectors.kafka.source.options import SourceOptions
from connectors.kafka.source.ranges import OffsetRange
from connectors.spark.source import KafkaStreamReader, source_schema
from integration_tests.conftest import create_topic
from integration_tests.source.conftest import delete_topic, offsets_of, produce, range_batches
from integration_tests.source.lying_metadata import LyingConsumer, told
from kafka_eos.cluster import KafkaCluster

pytestmark = [pytest.mark.kafka]

# A read that found the deletion only when its stall deadline expired would take this long.
_POLL_TIMEOUT_MS = 120_000


class _DeletedAfterTheLastRecord:
    """A real consumer whose topic is deleted, and the deletion awaited, at the first
    ``consume`` after the one that returned offset ``last``: the reader has read every record
    and waits at the end of the records for offsets that will never come."""

    def __init__(self, consumer: Consumer, bootstrap: str, topic: str, last: int) -> None:
        self._consumer, self._bootstrap, self._topic, self._last = consumer, bootstrap, topic, last
        self._read_last = False
        self.deleted_at_position: int | None = None

    def __getattr__(self, name: str) -> object:
        return getattr(self._consumer, name)

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Message]:
        if self._read_last and self.deleted_at_position is None:
            delete_topic(self._bootstrap, self._topic)
            [where] = self._consumer.position(self._consumer.assignment())
            self.deleted_at_position = where.offset
        messages = self._consumer.consume(num_messages, timeout=timeout)
        if any(m.error() is None and m.offset() == self._last for m in messages):
            self._read_last = True
        return messages


def _read_while_deleted(
    bootstrap: str, topic: str, fail_on_data_loss: str, monkeypatch: pytest.MonkeyPatch
) -> list[int]:
    """Read [0, 200) of a partition holding offsets 0-99; the topic is deleted once the
    reader has read offset 99 (``_DeletedAfterTheLastRecord``)."""
    opts = {
        "kafka.bootstrap.servers": bootstrap,
        "subscribe": topic,
        "failOnDataLoss": fail_on_data_loss,
        "kafkaConsumer.pollTimeoutMs": str(_POLL_TIMEOUT_MS),
    }
    real = range_reader.open_consumer
    reader: list[_DeletedAfterTheLastRecord] = []

    def open_reading_consumer(*args: Any, **kwargs: Any) -> object:
        if reader:  # the deletion check's own clients
            return real(*args, **kwargs)
        reader.append(_DeletedAfterTheLastRecord(real(*args, **kwargs), bootstrap, topic, 99))
        return reader[0]

    monkeypatch.setattr(range_reader, "open_consumer", open_reading_consumer)
    started = time.monotonic()
    try:
        return offsets_of(range_batches(opts, OffsetRange(topic, 0, 0, 200), streaming=False))
    finally:
        elapsed = time.monotonic() - started
        # The fault struck where it should: after the reader's position passed every record.
        assert reader and reader[0].deleted_at_position == 100, "the topic was not deleted at 100"
        assert elapsed < _POLL_TIMEOUT_MS / 1000, f"reported after {elapsed:.0f} s: at the stall"


@pytest.mark.parametrize("fail_on_data_loss", ["true", "false"])
def test_a_topic_deleted_during_a_read_is_data_loss(
    kafka: KafkaCluster, topic_factory, monkeypatch: pytest.MonkeyPatch, fail_on_data_loss: str
) -> None:
    bootstrap, topic = kafka.bootstrap_servers, topic_factory(partitions=1)
    produce(bootstrap, topic, range(100), partition=0)
    if fail_on_data_loss == "true":
        with pytest.raises(DataLossError, match=rf"{topic}-0 is gone .*\[100, 200\)"):
            _read_while_deleted(bootstrap, topic, fail_on_data_loss, monkeypatch)
    else:
        offsets = _read_while_deleted(bootstrap, topic, fail_on_data_loss, monkeypatch)
        assert offsets == list(range(100))


@pytest.mark.parametrize("fail_on_data_loss", ["true", "false"])
def test_one_unknown_answer_during_a_read_is_not_a_deletion(
    kafka: KafkaCluster,
    topic_factory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fail_on_data_loss: str,
) -> None:
    """The contrast: the topic stays, but one ``consume`` answer carries "unknown topic or
    partition" between real records and the next metadata answer calls the topic unknown
    (``lying_metadata.py``). Every record is read, once."""
    bootstrap, topic = kafka.bootstrap_servers, topic_factory(partitions=1)
    produce(bootstrap, topic, range(500), partition=0)
    switch = tmp_path / "lie"
    switch.touch()
    real = range_reader.open_consumer
    monkeypatch.setattr(
        range_reader,
        "open_consumer",
        lambda *a, **k: LyingConsumer(real(*a, **k), topic, consume_switch=str(switch)),
    )
    opts = {
        "kafka.bootstrap.servers": bootstrap,
        "subscribe": topic,
        "failOnDataLoss": fail_on_data_loss,
    }
    batches = range_batches(opts, OffsetRange(topic, 0, 0, 500), streaming=False)
    keys = [int(k) for b in batches for k in b.column("key").to_pylist()]
    assert len(told(str(switch))) == 2, told(str(switch))  # the error, one metadata answer
    assert Counter(keys) == Counter(range(500))


@pytest.mark.parametrize("fail_on_data_loss", ["true", "false"])
def test_a_topic_deleted_between_triggers_is_confirmed_then_data_loss(
    kafka: KafkaCluster, topic_factory, fail_on_data_loss: str
) -> None:
    """The driver's side, as Spark calls it (no Spark needed): a real deletion is still
    found, after the confirmation, and reported as ``failOnDataLoss`` says."""
    bootstrap, topic = kafka.bootstrap_servers, topic_factory(partitions=2)
    produce(bootstrap, topic, range(100))
    opts = {
        "kafka.bootstrap.servers": bootstrap,
        "subscribe": topic,
        "startingOffsets": "earliest",
        "failOnDataLoss": fail_on_data_loss,
    }
    stream = KafkaStreamReader(opts, source_schema(opts))
    try:
        start = stream.initialOffset()
        end = stream.latestOffset(start, ReadAllAvailable())
        assert sum(end[topic].values()) == 100
        delete_topic(bootstrap, topic)
        started = time.monotonic()
        after = stream.latestOffset(end, ReadAllAvailable())
        assert time.monotonic() - started >= source_client._GONE_CONFIRM_S
        assert after == {}
        if fail_on_data_loss == "true":
            with pytest.raises(DataLossError, match=rf"{topic}-0 is gone"):
                stream.partitions(end, after)
        else:
            assert stream.partitions(end, after) == []
    finally:
        stream.stop()


class _Recording:
    """A real consumer that notes which broker answered each metadata request."""

    def __init__(self, consumer: Consumer, answered_by: list[int]) -> None:
        self._consumer, self._answered_by = consumer, answered_by

    def list_topics(self, *args: object, **kwargs: object) -> ClusterMetadata:
        answer = self._consumer.list_topics(*args, **kwargs)
        self._answered_by.append(answer.orig_broker_id)
        return answer

    def close(self) -> None:
        self._consumer.close()


def test_a_deletion_on_several_brokers_is_confirmed_by_two_of_them(kafka_factory) -> None:
    """librdkafka sends one client's metadata requests to one broker; the check opens fresh
    clients until a second broker has said "unknown" too."""
    cluster = kafka_factory(nodes=3)
    bootstrap = cluster.bootstrap_servers
    topic = create_topic(bootstrap, partitions=2, replication=2)
    options = SourceOptions.parse(
        {"kafka.bootstrap.servers": bootstrap, "subscribe": topic}, streaming=False
    )
    answered_by: list[int] = []
    main = _Recording(open_consumer(options, "g-check"), answered_by)

    def connect() -> _Recording:
        return _Recording(open_consumer(options, "g-check"), answered_by)

    keys = [(topic, 0), (topic, 1)]
    try:
        assert confirmed_absent(main, keys, connect) == set()  # type: ignore[arg-type]
        delete_topic(bootstrap, topic)
        # Right after the deletion a broker may still show the topic, which clears it: the
        # driver asks again at its next trigger, a task at its next stall check.
        deadline = time.monotonic() + 30
        confirmed: set = set()
        while confirmed != set(keys) and time.monotonic() < deadline:
            answered_by.clear()
            confirmed = confirmed_absent(main, keys, connect)  # type: ignore[arg-type]
        assert confirmed == set(keys)
        assert len(set(answered_by) - {-1}) >= 2, answered_by
    finally:
        main.close()
