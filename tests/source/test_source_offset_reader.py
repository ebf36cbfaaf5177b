"""The driver's lookups against a scripted consumer: metadata and ListOffsets errors are
retried, fail loudly, or mean "no such topic", each as Kafka means them. No broker."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, TopicPartition
from kafka_metadata import FakeMetadata, FakeTopic

from connectors.kafka.offset_reader import KafkaOffsetReader
from connectors.kafka.offsets import PartitionKey
from connectors.kafka.source_errors import KafkaSourceError
from connectors.kafka.source_options import parse_options


class FakeConsumer:
    """Each call takes the next scripted answer; the last one repeats."""

    def __init__(
        self,
        metadata: list[dict[str, FakeTopic]] | None = None,
        offsets: list[dict[PartitionKey, int | KafkaError]] | None = None,
    ) -> None:
        self.metadata = metadata or []
        self.offsets = offsets or []
        self.asked: list[list[tuple[PartitionKey, int]]] = []

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> FakeMetadata:
        topics = self.metadata.pop(0) if len(self.metadata) > 1 else self.metadata[0]
        if topic is None:
            return FakeMetadata(topics)
        return FakeMetadata({topic: topics.get(topic, FakeTopic([], 3))})

    def offsets_for_times(self, request: list[TopicPartition], timeout: float) -> list:
        self.asked.append([((tp.topic, tp.partition), tp.offset) for tp in request])
        answer = self.offsets.pop(0) if len(self.offsets) > 1 else self.offsets[0]
        result = []
        for tp in request:
            value = answer[(tp.topic, tp.partition)]
            error = value if isinstance(value, KafkaError) else None
            offset = -1001 if error is not None else value
            result.append(
                SimpleNamespace(topic=tp.topic, partition=tp.partition, offset=offset, error=error)
            )
        return result


def reader(consumer: FakeConsumer, **options: str) -> KafkaOffsetReader:
    opts = {"kafka.bootstrap.servers": "k:9092", "kafka.default.api.timeout.ms": "3000"}
    kafka = KafkaOffsetReader(parse_options({**opts, **options}, streaming=True), "g")
    kafka._consumer = consumer  # type: ignore[assignment]
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
