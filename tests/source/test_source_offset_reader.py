"""The driver's lookups against a scripted consumer: metadata and ListOffsets errors are
retried, fail loudly, or mean "no such topic", each as Kafka means them. No broker."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from kafka_metadata import DescribesTopics, FakeMetadata, FakeTopic

from connectors.kafka.source import client as source_client
from connectors.kafka.source.errors import KafkaSourceError
from connectors.kafka.source.offset_reader import KafkaOffsetReader
from connectors.kafka.source.offsets import PartitionKey
from connectors.kafka.source.options import SourceOptions


class FakeConsumer(DescribesTopics):
    """Each call takes the next scripted answer; the last one repeats."""

    def __init__(
        self,
        metadata: list[dict[str, FakeTopic]] | None = None,
        offsets: list[dict[PartitionKey, int | KafkaError] | KafkaError] | None = None,
    ) -> None:
        self.metadata = metadata or []
        self.offsets = offsets or []
        self.asked: list[list[tuple[PartitionKey, int]]] = []
        self.listed: list[str | None] = []  # list_topics calls, by topic (None: all)

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> FakeMetadata:
        self.listed.append(topic)
        if not self.metadata:
            return FakeMetadata({})
        topics = self.metadata.pop(0) if len(self.metadata) > 1 else self.metadata[0]
        if topic is None:
            return FakeMetadata(topics)
        return FakeMetadata({topic: topics.get(topic, FakeTopic([], 3))})

    def offsets_for_times(self, request: list[TopicPartition], timeout: float) -> list:
        self.asked.append([((tp.topic, tp.partition), tp.offset) for tp in request])
        answer = self.offsets.pop(0) if len(self.offsets) > 1 else self.offsets[0]
        if isinstance(answer, KafkaError):  # the whole request failed
            raise KafkaException(answer)
        result = []
        for tp in request:
            value = answer[(tp.topic, tp.partition)]
            error = value if isinstance(value, KafkaError) else None
            offset = -1001 if error is not None else value
            result.append(
                SimpleNamespace(topic=tp.topic, partition=tp.partition, offset=offset, error=error)
            )
        return result


@pytest.fixture(autouse=True)
def _quick_confirmation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(source_client, "_GONE_CONFIRM_S", 0.0)
    monkeypatch.setattr(source_client, "_GONE_POLL_S", 0.0)


def reader(consumer: FakeConsumer, **options: str) -> KafkaOffsetReader:
    opts = {"kafka.bootstrap.servers": "k:9092", "kafka.default.api.timeout.ms": "3000"}
    kafka = KafkaOffsetReader(SourceOptions.parse({**opts, **options}, streaming=True), "g")
    kafka._consumer = consumer  # type: ignore[assignment]
    kafka._admin_client = consumer  # type: ignore[assignment]
    return kafka


def test_a_topic_the_query_may_not_read_fails_naming_it_and_the_acl() -> None:
    denied = FakeConsumer([{"orders": FakeTopic([], KafkaError.TOPIC_AUTHORIZATION_FAILED)}])
    with pytest.raises(KafkaSourceError, match=r"topic orders .*Describe and Read ACLs"):
        reader(denied, subscribe="orders").partitions()


def test_a_transient_topic_error_is_retried_not_taken_for_a_deleted_topic() -> None:
    moving = FakeConsumer(
        [
            {"orders": FakeTopic([], KafkaError.LEADER_NOT_AVAILABLE)},
            {"orders": FakeTopic([0, 1])},
        ]
    )
    assert reader(moving, subscribe="orders").partitions() == [("orders", 0), ("orders", 1)]
    pattern = FakeConsumer(
        [
            {"o-1": FakeTopic([0]), "o-2": FakeTopic([], KafkaError.LEADER_NOT_AVAILABLE)},
            {"o-1": FakeTopic([0]), "o-2": FakeTopic([0])},
        ]
    )
    assert reader(pattern, subscribePattern="o-.*").partitions() == [("o-1", 0), ("o-2", 0)]


def test_a_missing_topic_has_no_partitions() -> None:
    assert reader(FakeConsumer([{}]), subscribe="orders").partitions() == []


@pytest.mark.parametrize(
    "code",
    [
        KafkaError.OFFSET_NOT_AVAILABLE,
        KafkaError.FENCED_LEADER_EPOCH,
        KafkaError.UNKNOWN_LEADER_EPOCH,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NOT_LEADER_FOR_PARTITION,
    ],
)
def test_retriable_partition_errors_of_list_offsets_are_retried(code: int) -> None:
    consumer = FakeConsumer(offsets=[{("t", 0): KafkaError(code)}, {("t", 0): 42}])
    assert reader(consumer, subscribe="t").latest([("t", 0)]) == {("t", 0): 42}
    # librdkafka's cached leaders and partitions are refreshed before the retry.
    assert consumer.listed == ["t"]


def test_a_request_failed_by_a_broker_handle_destroyed_is_retried() -> None:
    """librdkafka fails the whole request when it drops a broker's handle with the request in
    flight (seen in a chaos run as a killed broker restarted): the next try uses another."""
    destroyed = KafkaError(KafkaError._DESTROY_BROKER)
    consumer = FakeConsumer(offsets=[destroyed, {("t", 0): 42}])
    assert reader(consumer, subscribe="t").latest([("t", 0)]) == {("t", 0): 42}
    assert len(consumer.asked) == 2


def test_a_partition_librdkafkas_cache_lacks_is_refreshed_and_retried() -> None:
    """A partition added since the consumer's metadata was cached: librdkafka answers
    _UNKNOWN_PARTITION without asking (the admin client found the partition)."""
    unknown = KafkaError(KafkaError._UNKNOWN_PARTITION)
    consumer = FakeConsumer(offsets=[{("t", 0): 5, ("t", 2): unknown}, {("t", 0): 5, ("t", 2): 1}])
    latest = reader(consumer, subscribe="t").latest([("t", 0), ("t", 2)])
    assert latest == {("t", 0): 5, ("t", 2): 1}
    assert consumer.listed == ["t"]


def test_other_partition_errors_of_list_offsets_fail_at_once() -> None:
    consumer = FakeConsumer(offsets=[{("t", 0): KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)}])
    with pytest.raises(KafkaSourceError, match="list offsets"):
        reader(consumer, subscribe="t").latest([("t", 0)])
    assert len(consumer.asked) == 1


def test_a_stream_start_keeps_latest_symbolic_and_resolves_earliest() -> None:
    consumer = FakeConsumer(offsets=[{("t", 0): 7}])
    kafka = reader(consumer, subscribe="t", startingOffsets='{"t":{"0":-2,"1":-1,"2":5}}')
    start = kafka.resolve(kafka._options.starting, [("t", 0), ("t", 1), ("t", 2)], keep_latest=True)
    assert start == {("t", 0): 7, ("t", 1): -1, ("t", 2): 5}
    assert consumer.asked == [[(("t", 0), -2)]]


def test_bounds_resolve_by_value_not_by_enum_identity() -> None:
    """A reloaded options module (a notebook's autoreload) makes new enum members: a start at
    latest must still resolve as latest, not fall into a timestamp lookup (the earliest)."""
    consumer = FakeConsumer(offsets=[])
    kafka = reader(consumer, subscribe="t")
    starting = kafka._options.starting
    reloaded = dataclasses.replace(starting, kind=str(starting.kind), side=str(starting.side))
    assert kafka.resolve(reloaded, [("t", 0)], keep_latest=True) == {("t", 0): -1}
    assert consumer.asked == []


class TestUnknownForOneAnswer:
    """A partition the query has planned that one metadata answer leaves out (a broker not
    caught up, a brief ACL change) stays where it is; only a confirmed deletion drops it."""

    def test_a_subscribed_topic_unknown_once_is_held_at_its_start(self) -> None:
        consumer = FakeConsumer([{}, {"orders": FakeTopic([0, 1])}])
        start = {("orders", 0): 5, ("orders", 1): 7}
        latest, held = reader(consumer, subscribe="orders").latest_since(start)
        assert (latest, held) == ({}, start)
        assert consumer.asked == []  # no ListOffsets for a partition this answer lacks

    def test_a_topic_left_out_of_one_pattern_listing_is_held_at_its_start(self) -> None:
        consumer = FakeConsumer(
            [{"o-1": FakeTopic([0])}, {"o-1": FakeTopic([0]), "o-2": FakeTopic([0])}],
            offsets=[{("o-1", 0): 10}],
        )
        start = {("o-1", 0): 3, ("o-2", 0): 4}
        latest, held = reader(consumer, subscribePattern="o-.*").latest_since(start)
        assert (latest, held) == ({("o-1", 0): 10}, {("o-2", 0): 4})

    def test_an_assigned_partition_unknown_once_is_held_at_its_start(self) -> None:
        consumer = FakeConsumer(
            [{"t": FakeTopic([0])}, {"t": FakeTopic([0, 1])}], offsets=[{("t", 0): 9}]
        )
        kafka = reader(consumer, assign='{"t":[0,1]}')
        assert kafka.latest_since({("t", 0): 2, ("t", 1): 6}) == ({("t", 0): 9}, {("t", 1): 6})

    def test_a_confirmed_deletion_is_not_held(self) -> None:
        consumer = FakeConsumer([{}])
        start = {("orders", 0): 5}
        assert reader(consumer, subscribe="orders").latest_since(start) == ({}, {})
        assert len(consumer.metadata) == 1  # asked again and again: the same answer

    def test_a_partition_the_subscription_no_longer_covers_is_dropped_unconfirmed(self) -> None:
        """As in Spark, restarting with another subscription reports the old partitions."""
        consumer = FakeConsumer([{"orders": FakeTopic([0])}], offsets=[{("orders", 0): 1}])
        kafka = reader(consumer, subscribe="orders")
        calls = []
        kafka.absent = lambda keys: calls.append(keys) or set()  # type: ignore[method-assign]
        assert kafka.latest_since({("orders", 0): 0, ("old", 0): 3}) == ({("orders", 0): 1}, {})
        assert calls == []

    def test_a_named_topic_unknown_once_is_still_read_from_the_start(self) -> None:
        consumer = FakeConsumer([{}, {"orders": FakeTopic([0, 1])}])
        kafka = reader(consumer, subscribe="orders")
        assert kafka.partitions_to_start() == [("orders", 0), ("orders", 1)]
        consumer = FakeConsumer([{"t": FakeTopic([0])}, {"t": FakeTopic([0, 1])}])
        kafka = reader(consumer, assign='{"t":[0,1]}')
        assert kafka.partitions_to_start() == [("t", 0), ("t", 1)]

    def test_a_named_topic_confirmed_absent_is_left_out_of_the_start(self) -> None:
        consumer = FakeConsumer([{"a": FakeTopic([0])}])
        assert reader(consumer, subscribe="a,b").partitions_to_start() == [("a", 0)]

    def test_a_pattern_start_is_one_listing(self) -> None:
        consumer = FakeConsumer(
            [{"o-1": FakeTopic([0])}, {"o-1": FakeTopic([0]), "o-2": FakeTopic([0])}]
        )
        assert reader(consumer, subscribePattern="o-.*").partitions_to_start() == [("o-1", 0)]

    def test_answers_that_keep_disagreeing_fail_after_the_api_timeout(self) -> None:
        class Flapping(FakeConsumer):
            """Unknown in every other answer, forever."""

            calls = 0

            def list_topics(self, topic: str | None = None, timeout: float = -1) -> FakeMetadata:
                self.calls += 1
                self.metadata = [{"orders": FakeTopic([0])} if self.calls % 2 == 0 else {}]
                return super().list_topics(topic, timeout)

        consumer = Flapping()
        kafka = reader(consumer, subscribe="orders", **{"kafka.default.api.timeout.ms": "20"})
        with pytest.raises(KafkaSourceError, match="kept disagreeing on whether orders-0 exist"):
            kafka.partitions_to_start()
