"""Stand-ins for confluent-kafka's cluster metadata, shared by the source's unit tests."""

from __future__ import annotations

from collections.abc import Iterable

from confluent_kafka import KafkaError


class FakeTopic:
    """A topic's metadata: its partitions, and the error code the broker gave for it."""

    def __init__(self, partitions: Iterable[int], error: int | None = None) -> None:
        self.partitions = dict.fromkeys(partitions)
        self.error = KafkaError(error) if error is not None else None


class FakeMetadata:
    def __init__(self, topics: dict[str, FakeTopic]) -> None:
        self.topics = topics
