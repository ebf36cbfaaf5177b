"""``drain`` (what ``kafka-eos verify`` and the tests read back) against a scripted consumer:
it must end for a partition whose records were all deleted, and ride out a broker briefly
away. No broker."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, TopicPartition

from kafka_eos.operations import drain as drain_module
from kafka_eos.operations.drain import drain


def record(partition: int, offset: int) -> SimpleNamespace:
    return SimpleNamespace(
        error=lambda: None,
        partition=lambda: partition,
        offset=lambda: offset,
        key=lambda: str(offset).encode(),
        value=lambda: b"v",
        headers=lambda: None,
    )


def failure(code: int) -> SimpleNamespace:
    return SimpleNamespace(error=lambda: KafkaError(code))


class FakeConsumer:
    """Partition 0 holds offsets [0, 3); partition 1's records were all deleted (5 == 5)."""

    def __init__(self, answers: list[list[SimpleNamespace]]) -> None:
        self.marks = {0: (0, 3), 1: (5, 5)}
        self.answers = answers
        self.positions = {0: -1001, 1: -1001}

    def list_topics(self, topic: str, timeout: float) -> SimpleNamespace:
        meta = SimpleNamespace(error=None, partitions=dict.fromkeys(self.marks))
        return SimpleNamespace(topics={topic: meta})

    def get_watermark_offsets(self, tp: TopicPartition, timeout: float, cached: bool) -> tuple:
        return self.marks[tp.partition]

    def assign(self, parts: list[TopicPartition]) -> None:
        pass

    def consume(self, num_messages: int, timeout: float) -> list[SimpleNamespace]:
        answer = self.answers.pop(0) if self.answers else []
        for message in answer:
            if message.error() is None:
                self.positions[message.partition()] = message.offset() + 1
        return answer

    def position(self, parts: list[TopicPartition]) -> list[TopicPartition]:
        return [
            TopicPartition(tp.topic, tp.partition, self.positions[tp.partition]) for tp in parts
        ]

    def close(self) -> None:
        pass


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch):
    def install(answers: list[list[SimpleNamespace]]) -> None:
        monkeypatch.setattr(drain_module, "Consumer", lambda config: FakeConsumer(answers))

    return install


def test_a_partition_whose_records_were_all_deleted_ends_the_drain(scripted) -> None:
    scripted([[record(0, o) for o in range(3)]])
    assert [r.offset for r in drain("k:9092", "t", timeout_s=2)] == [0, 1, 2]


def test_a_transient_consume_error_is_ridden_out(scripted) -> None:
    scripted([[failure(KafkaError._TRANSPORT)], [record(0, o) for o in range(3)]])
    assert [r.offset for r in drain("k:9092", "t", timeout_s=2)] == [0, 1, 2]
