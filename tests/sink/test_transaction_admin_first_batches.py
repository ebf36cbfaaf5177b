"""``TransactionAdmin.first_batches_at`` without a broker: one Fetch per leader, each answer
read back to its partition. On a real broker: ``integration_tests/sink/
test_skipped_commit_markers.py``; through the protocol model: ``test_sink_properties.py``."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import kafka.errors as Errors
import pytest
from kafka.future import Future
from kafka.record.memory_records import MemoryRecordsBuilder
from kafka.structs import TopicPartition

from connectors.kafka import txn_coordinators
from connectors.kafka.partition_txns import BatchHeader
from connectors.kafka.transactions import TransactionAdmin

LEADERS = {("out", 0): 2, ("out", 1): 3, ("out", 2): 2, ("in", 0): 3}
GONE = TopicPartition("out", 2)  # deleted by retention: OFFSET_OUT_OF_RANGE


def batch_at(offset: int, producer_id: int, epoch: int) -> bytes:
    builder = MemoryRecordsBuilder(
        magic=2, compression_type=0, batch_size=1024, offset=offset, transactional=True,
        producer_id=producer_id, producer_epoch=epoch, base_sequence=0,
    )  # fmt: skip
    builder.append(timestamp=0, key=None, value=b"x", headers=[])
    builder.close()
    return bytes(builder.buffer())


class Leaders:
    """Answers each Fetch with a batch of producer ``10 + partition``, epoch ``offset`` (whose
    header says base offset 0: the builder leaves offsets to the broker)."""

    def __init__(self) -> None:
        self.fetched: list[tuple[int, list[tuple[str, int, int]]]] = []

    def send(self, net: Any, node_id: int, request: Any) -> Future:
        asked = [
            (t.topic, p.partition, p.fetch_offset) for t in request.topics for p in t.partitions
        ]
        self.fetched.append((node_id, asked))
        topics = [
            SimpleNamespace(topic=t.topic, partitions=[
                SimpleNamespace(
                    partition_index=p.partition,
                    error_code=Errors.OffsetOutOfRangeError.errno
                    if (t.topic, p.partition) == GONE else 0,
                    records=batch_at(p.fetch_offset, 10 + p.partition, p.fetch_offset),
                )
                for p in t.partitions
            ])
            for t in request.topics
        ]  # fmt: skip
        return Future().success(SimpleNamespace(responses=topics))


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch) -> tuple[TransactionAdmin, Leaders]:
    leaders = Leaders()
    admin = object.__new__(TransactionAdmin)
    admin._request_timeout_s = 5  # type: ignore[attr-defined]
    admin._net = SimpleNamespace(poll=lambda **_: None)  # type: ignore[attr-defined]

    def describe_topics(topics: list[str]) -> list[dict[str, Any]]:
        return [
            {"name": name, "error_code": 0, "partitions": [
                {"partition_index": p, "leader_id": leader}
                for (t, p), leader in LEADERS.items() if t == name
            ]}
            for name in topics
        ]  # fmt: skip

    admin._admin = SimpleNamespace(describe_topics=describe_topics)  # type: ignore[attr-defined]
    monkeypatch.setattr(txn_coordinators, "send", leaders.send)  # under answer_of
    return admin, leaders


def test_one_fetch_per_leader_and_each_answer_to_its_partition(
    admin: tuple[TransactionAdmin, Leaders],
) -> None:
    txn_admin, leaders = admin
    offsets = {TopicPartition(t, p): 40 + n for n, (t, p) in enumerate(LEADERS)}
    headers = txn_admin.first_batches_at(offsets)
    assert sorted(leaders.fetched) == [
        (2, [("out", 0, 40), ("out", 2, 42)]),
        (3, [("in", 0, 43), ("out", 1, 41)]),
    ]
    assert headers == {
        TopicPartition("out", 0): BatchHeader(0, 10, 40, True),
        TopicPartition("out", 1): BatchHeader(0, 11, 41, True),
        GONE: None,
        TopicPartition("in", 0): BatchHeader(0, 10, 43, True),
    }


def test_a_partition_without_a_leader_is_named(admin: tuple[TransactionAdmin, Leaders]) -> None:
    txn_admin, leaders = admin
    with pytest.raises(Errors.LeaderNotAvailableError, match="out-7 has no leader"):
        txn_admin.first_batches_at({TopicPartition("out", 7): 0})
    assert leaders.fetched == []
