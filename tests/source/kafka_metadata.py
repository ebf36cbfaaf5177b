"""Stand-ins for confluent-kafka's cluster metadata, shared by the source's unit tests."""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicCollection, TopicPartition


class FakeTopic:
    """A topic's metadata: its partitions, and the error code the broker gave for it."""

    def __init__(self, partitions: Iterable[int], error: int | None = None) -> None:
        self.partitions = dict.fromkeys(partitions)
        self.error = KafkaError(error) if error is not None else None


class FakeBroker:
    def __init__(self, broker_id: int) -> None:
        self.id, self.host, self.port = broker_id, "k", 9091 + broker_id


class FakeMetadata:
    """An answer to ``list_topics``, by default from broker 1 of a one-broker cluster."""

    def __init__(
        self,
        topics: dict[str, FakeTopic],
        *,
        answered_by: int = 1,
        brokers: Iterable[int] = (1,),
    ) -> None:
        self.topics = topics
        self.brokers = {broker: FakeBroker(broker) for broker in brokers}
        self.orig_broker_id = answered_by
        self.orig_broker_name = f"k:{9091 + answered_by}/{answered_by}"


UNKNOWN = KafkaError.UNKNOWN_TOPIC_OR_PART


class DescribesTopics:
    """``describe_topics`` (the admin client's one Metadata request for several topics) from
    one ``list_topics`` answer of the fake it is mixed into: so one scripted answer serves one
    request, whichever way the reader asks."""

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        raise NotImplementedError

    def describe_topics(self, topics: TopicCollection, **kwargs: object) -> dict[str, Future]:
        listing = self.list_topics(None).topics
        answers: dict[str, Future] = {}
        for name in topics.topic_names:
            answer: Future = Future()
            topic = listing.get(name, FakeTopic([], UNKNOWN))
            if topic.error is not None:
                answer.set_exception(KafkaException(topic.error))
            else:
                partitions = [SimpleNamespace(id=p) for p in topic.partitions]
                answer.set_result(SimpleNamespace(name=name, partitions=partitions))
            answers[name] = answer
        return answers


class FakeCluster(DescribesTopics):
    """A consumer for a real ``KafkaOffsetReader``: metadata and latest offsets from
    ``latest``; ``lie_about`` leaves a topic out of the next metadata answer only."""

    def __init__(self, latest: dict[tuple[str, int], int]) -> None:
        self.latest = latest
        self.lie_about: str | None = None
        self.asked_offsets: list[tuple[str, int]] = []

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> FakeMetadata:
        topics: dict[str, list[int]] = {}
        for name, partition in sorted(self.latest):
            topics.setdefault(name, []).append(partition)
        answer = {name: FakeTopic(partitions) for name, partitions in topics.items()}
        if self.lie_about is not None:
            answer.pop(self.lie_about, None)
            self.lie_about = None
        if topic is None:
            return FakeMetadata(answer)
        return FakeMetadata({topic: answer.get(topic, FakeTopic([], UNKNOWN))})

    def offsets_for_times(self, request: list[TopicPartition], timeout: float) -> list:
        """Earliest (-2) is 0, anything else the latest offset."""
        self.asked_offsets.extend((tp.topic, tp.partition) for tp in request)
        return [
            SimpleNamespace(
                topic=tp.topic,
                partition=tp.partition,
                offset=0 if tp.offset == -2 else self.latest[(tp.topic, tp.partition)],
                error=None,
            )
            for tp in request
        ]
