"""``TransactionAdmin.write_commit_marker`` without a broker: what it sends and how it reads the
answer. On a real broker: ``integration_tests/sink/test_skipped_commit_markers.py`` (4.3.1)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import kafka.errors as Errors
import pytest
from kafka.future import Future
from kafka.protocol.producer.transaction import WriteTxnMarkersRequest
from kafka.structs import TopicPartition

from connectors.kafka import transactions, txn_coordinators
from connectors.kafka.transactions import TransactionAdmin

TP = TopicPartition("out", 1)


class Sent:
    """The requests sent, answered with ``codes`` (one per call, for partition 1 of ``out``)."""

    def __init__(self, *codes: int, max_version: int = 2) -> None:
        self.requests: list[Any] = []
        self.codes = list(codes)
        self.max_version = max_version

    def send(self, net: Any, node_id: int, request: Any) -> Future:
        self.requests.append((node_id, request))
        if not self.codes:  # an answer that names no partition
            return Future().success(SimpleNamespace(markers=[]))
        partition = SimpleNamespace(partition_index=TP.partition, error_code=self.codes.pop(0))
        topic = SimpleNamespace(name=TP.topic, partitions=[partition])
        return Future().success(
            SimpleNamespace(markers=[SimpleNamespace(producer_id=7, topics=[topic])])
        )

    def versions(self, net: Any, node_id: int, deadline: Any) -> dict[int, int]:
        return {WriteTxnMarkersRequest.API_KEY: self.max_version}


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch) -> tuple[TransactionAdmin, Sent]:
    """An admin whose connections are stubs: partition 1 of ``out`` is led by broker 3."""
    sent = Sent()
    admin = object.__new__(TransactionAdmin)
    admin._request_timeout_s = 5  # type: ignore[attr-defined]
    admin._net = SimpleNamespace(poll=lambda **_: None)  # type: ignore[attr-defined]
    partitions = [{"partition_index": 0, "leader_id": 2}, {"partition_index": 1, "leader_id": 3}]
    described = [{"name": "out", "error_code": 0, "partitions": partitions}]
    admin._admin = SimpleNamespace(describe_topics=lambda topics: described)  # type: ignore[attr-defined]
    monkeypatch.setattr(txn_coordinators, "send", lambda *a: sent.send(*a))  # under answer_of
    monkeypatch.setattr(transactions, "broker_max_versions", lambda *a: sent.versions(*a))
    return admin, sent


def test_a_v2_commit_marker_goes_once_to_the_leader_at_the_given_epochs(
    admin: tuple[TransactionAdmin, Sent],
) -> None:
    txn_admin, sent = admin
    sent.codes = [0]
    txn_admin.write_commit_marker(TP, 7, 3, 5)
    [(node, request)] = sent.requests
    [marker] = request.markers
    assert node == 3
    assert (marker.producer_id, marker.producer_epoch, marker.coordinator_epoch) == (7, 3, 5)
    assert (marker.transaction_result, marker.transaction_version) == (True, 2)
    assert [(t.name, t.partition_indexes) for t in marker.topics] == [("out", [1])]


def test_a_refused_marker_is_raised_and_never_sent_again(
    admin: tuple[TransactionAdmin, Sent],
) -> None:
    """A retriable answer too: between two attempts the partition may have moved on."""
    txn_admin, sent = admin
    sent.codes = [Errors.RequestTimedOutError.errno]
    with pytest.raises(Errors.RequestTimedOutError):
        txn_admin.write_commit_marker(TP, 7, 3, 5)
    assert len(sent.requests) == 1


def test_a_leader_without_write_txn_markers_v2_is_refused_before_sending(
    admin: tuple[TransactionAdmin, Sent],
) -> None:
    txn_admin, sent = admin
    sent.max_version = 1
    with pytest.raises(Errors.UnsupportedVersionError, match="WriteTxnMarkers v2"):
        txn_admin.write_commit_marker(TP, 7, 3, 5)
    assert sent.requests == []


def test_an_answer_that_names_no_partition_is_no_success(
    admin: tuple[TransactionAdmin, Sent],
) -> None:
    txn_admin, _ = admin
    with pytest.raises(Errors.KafkaError, match="answered"):
        txn_admin.write_commit_marker(TP, 7, 3, 5)
