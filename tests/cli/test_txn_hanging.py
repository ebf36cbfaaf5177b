"""``kafka_eos.operations.hanging`` without a broker: which open transactions count as hanging,
and when an abort marker is refused. The real thing runs on Kafka 3.5.2 and 3.9.2-nv in
``integration_tests/sink/test_fences.py``."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from kafka.admin import PartitionProducerState, ProducerState
from kafka.structs import TopicPartition

from connectors.kafka.txn_state import TxnDescription, TxnState
from kafka_eos.operations.hanging import abort_hanging, find_hanging
from kafka_eos.operations.lingering import LingeringTransactionError

TP = TopicPartition("out", 0)
NOW_MS = 1_700_000_000_000


def producer(pid: int, epoch: int, start: int, last_ms: int = NOW_MS - 600_000) -> ProducerState:
    return ProducerState(pid, epoch, 9, last_ms, 3, start)


class FakeKafkaAdmin:
    """kafka-python's admin as far as the hanging module uses it."""

    def __init__(self, open_on: list[ProducerState], leaders: list[int] | None = None) -> None:
        self.open_on = open_on
        self.leaders = leaders or [1, 1]
        self.listed: dict[int, list[Any]] = {}
        self.aborted: list[Any] = []

    def describe_topics(self, topics: list[str]) -> list[dict[str, Any]]:
        partitions = [
            {"partition_index": i, "leader_id": lead} for i, lead in enumerate(self.leaders)
        ]
        return [{"name": t, "error_code": 0, "partitions": partitions} for t in topics]

    def describe_producers(self, partitions: list[TopicPartition]) -> dict[Any, Any]:
        return {tp: PartitionProducerState(list(self.open_on)) for tp in partitions}

    def list_transactions(self, producer_id_filters: list[int]) -> dict[int, list[Any]]:
        return {1: [t for pid in producer_id_filters for t in self.listed.get(pid, [])]}

    def abort_transaction(self, spec: Any) -> None:
        self.aborted.append(spec)
        self.open_on = [p for p in self.open_on if p.producer_id != spec.producer_id]


class FakeTransactionAdmin:
    def __init__(
        self, kafka_admin: FakeKafkaAdmin, described: list[TxnDescription], *, v2: bool = False
    ) -> None:
        self.kafka_admin = kafka_admin
        self.v2 = v2  # the coordinators take EndTxn v5: a commit moves the epoch on
        self._described = {d.transactional_id: d for d in described}
        for d in described:
            kafka_admin.listed.setdefault(d.producer_id, []).append(
                SimpleNamespace(transactional_id=d.transactional_id)
            )

    def describe(self, ids: list[str]) -> dict[str, TxnDescription | None]:
        return {tid: self._described.get(tid) for tid in ids}

    def epoch_bumps_on_end_at(self, coordinator_id: int) -> bool:
        return self.v2


def described(state: TxnState, pid: int, epoch: int, partitions: tuple[Any, ...] = ()) -> Any:
    return TxnDescription(f"tid-{pid}", state, pid, epoch, 1, 60_000, NOW_MS - 900_000, partitions)


def find(admin: FakeTransactionAdmin, older_than_ms: int = 0) -> list[Any]:
    return find_hanging(admin, [TP], older_than_ms=older_than_ms, now_ms=NOW_MS)  # type: ignore[arg-type]


def test_an_open_transaction_its_coordinator_tracks_is_not_hanging() -> None:
    kafka = FakeKafkaAdmin([producer(7, 2, 40)])
    tracked = described(TxnState.ONGOING, 7, 2, (("out", 0),))
    assert find(FakeTransactionAdmin(kafka, [tracked])) == []
    marking = described(TxnState.PREPARE_ABORT, 7, 3, (("out", 0),))
    assert find(FakeTransactionAdmin(FakeKafkaAdmin([producer(7, 2, 40)]), [marking])) == []


def test_an_open_transaction_no_coordinator_tracks_is_hanging_once_old_enough() -> None:
    kafka = FakeKafkaAdmin([producer(7, 2, 40, last_ms=NOW_MS - 60_000)])
    admin = FakeTransactionAdmin(kafka, [described(TxnState.COMPLETE_ABORT, 7, 2)])
    [hanging] = find(admin)
    assert (hanging.open.start_offset, hanging.coordinator.state) == (40, TxnState.COMPLETE_ABORT)
    assert find(admin, older_than_ms=900_000) == []  # its producer wrote a minute ago


def test_nothing_is_judged_while_a_partition_of_the_transaction_log_has_no_leader() -> None:
    """Its coordinator is offline: a decided transaction whose COMMIT markers it has yet to
    write would look hanging, and an abort marker would lose part of a committed batch."""
    kafka = FakeKafkaAdmin([producer(7, 2, 40)], leaders=[1, -1])
    with pytest.raises(LingeringTransactionError, match=r"partitions \[1\] have no leader"):
        find(FakeTransactionAdmin(kafka, []))


def test_no_abort_marker_for_a_transaction_its_coordinator_committed_at_that_epoch() -> None:
    kafka = FakeKafkaAdmin([producer(7, 2, 40)])
    admin = FakeTransactionAdmin(kafka, [described(TxnState.COMPLETE_COMMIT, 7, 2)])
    [hanging] = find(admin)
    assert "its coordinator committed it" in (abort_hanging(admin, hanging) or "")  # type: ignore[arg-type]
    assert kafka.aborted == []


def test_no_abort_marker_for_a_v2_commit_that_moved_the_epoch_on() -> None:
    """Found by the chaos harness on 4.3.1: a coordinator killed as a batch's EndTxns went out
    left CompleteCommit at epoch 3 and no COMMIT marker on a partition that still shows the
    transaction open at epoch 2. An abort marker there would lose a committed batch."""
    kafka = FakeKafkaAdmin([producer(7, 2, 40)])
    admin = FakeTransactionAdmin(kafka, [described(TxnState.COMPLETE_COMMIT, 7, 3)], v2=True)
    [hanging] = find(admin)
    assert "its coordinator committed it" in (abort_hanging(admin, hanging) or "")  # type: ignore[arg-type]
    assert kafka.aborted == []


def test_an_abort_marker_where_v1_committed_a_later_transaction_of_the_producer() -> None:
    """Under transactions V1 the epoch moves on only by InitProducerId, which aborts: a commit
    at the next epoch is another transaction, and the open one is not committed."""
    kafka = FakeKafkaAdmin([producer(7, 2, 40)])
    admin = FakeTransactionAdmin(kafka, [described(TxnState.COMPLETE_COMMIT, 7, 3)], v2=False)
    [hanging] = find(admin)
    assert abort_hanging(admin, hanging) is None  # type: ignore[arg-type]
    assert [(s.producer_id, s.producer_epoch) for s in kafka.aborted] == [(7, 2)]


def test_no_abort_marker_once_the_partition_no_longer_has_it_open() -> None:
    """Looked at again after the operator's confirmation: what is open now may be another
    transaction of the same producer."""
    kafka = FakeKafkaAdmin([producer(7, 2, 40)])
    admin = FakeTransactionAdmin(kafka, [])
    [hanging] = find(admin)
    kafka.open_on = [producer(7, 2, 55)]  # ended, and another one began at the same epoch
    assert abort_hanging(admin, hanging) == "not aborted: no longer open on its partition"  # type: ignore[arg-type]
    kafka.open_on = [producer(7, 2, 40)]
    assert abort_hanging(admin, hanging) is None  # type: ignore[arg-type]
    assert [(s.producer_id, s.producer_epoch) for s in kafka.aborted] == [(7, 2)]
