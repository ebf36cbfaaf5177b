"""``kafka_eos.operations.hanging`` without a broker: which open transactions count as hanging,
and when an abort marker is refused. The real thing runs on Kafka 3.5.2 and 3.9.2-nv in
``integration_tests/sink/test_fences.py``."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner
from kafka.admin import PartitionProducerState, ProducerState
from kafka.structs import TopicPartition

from connectors.kafka.sink.naming import TransactionalIdNaming
from connectors.kafka.txn_state import TxnDescription, TxnState
from kafka_eos.commands.txn import _end_one
from kafka_eos.commands.txn import command as txn_command
from kafka_eos.operations.hanging import abort_hanging, commit_hanging, find_hanging
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
        self, kafka_admin: FakeKafkaAdmin, described: list[TxnDescription], *, v2: bool = True
    ) -> None:
        self.kafka_admin = kafka_admin
        self.v2 = v2  # the coordinators take EndTxn v5: a commit moves the epoch on
        self.committed: list[tuple[TopicPartition, int, int, int]] = []
        self._described: dict[str, TxnDescription] = {}
        for d in described:
            self.now(d)

    def now(self, d: TxnDescription) -> None:
        """The coordinator shows ``d`` of its id from now on."""
        self._described[d.transactional_id] = d
        self.kafka_admin.listed = {
            n.producer_id: [SimpleNamespace(transactional_id=n.transactional_id)]
            for n in self._described.values()
        }

    def describe(self, ids: list[str]) -> dict[str, TxnDescription | None]:
        return {tid: self._described.get(tid) for tid in ids}

    def epoch_bumps_on_end_at(self, coordinator_id: int) -> bool:
        return self.v2

    def write_commit_marker(
        self, tp: TopicPartition, producer_id: int, marker_epoch: int, coordinator_epoch: int
    ) -> None:
        self.committed.append((tp, producer_id, marker_epoch, coordinator_epoch))
        self.kafka_admin.open_on = [
            p for p in self.kafka_admin.open_on if p.producer_id != producer_id
        ]


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


def abort(admin: FakeTransactionAdmin, *, force: bool = False) -> str | None:
    [hanging] = find(admin)
    return abort_hanging(admin, hanging, force=force)  # type: ignore[arg-type]


def aborted(kafka: FakeKafkaAdmin) -> list[tuple[int, int]]:
    return [(s.producer_id, s.producer_epoch) for s in kafka.aborted]


@pytest.mark.parametrize(
    ("state", "epoch", "v2"),
    [
        (TxnState.COMPLETE_ABORT, 2, False),  # EndTxn(abort) under transactions V1 keeps it
        (TxnState.COMPLETE_ABORT, 3, True),  # a V2 EndTxn, a fence or a timeout abort bumps it
        (TxnState.PREPARE_ABORT, 3, True),
    ],
)
def test_an_abort_marker_where_its_coordinator_shows_the_abort_that_ended_it(
    state: TxnState, epoch: int, v2: bool
) -> None:
    """The one case with positive evidence: the producer wrote on here after its transaction
    (begun before that write) was aborted, on a broker without partition verification."""
    kafka = FakeKafkaAdmin([producer(7, 2, 40)])
    assert abort(FakeTransactionAdmin(kafka, [described(state, 7, epoch)], v2=v2)) is None
    assert aborted(kafka) == [(7, 2)]


def test_no_abort_marker_for_an_abort_at_the_next_epoch_under_v1() -> None:
    """Red team: under V1 it is as likely the next transaction's own abort after an
    ``init_transactions`` (a sink's next batch on the slot, failing on the same offline
    leader), and this one, committed, lost its marker; only clocks would tell them apart."""
    kafka = FakeKafkaAdmin([producer(7, 2, 40)])
    next_batch = replace(described(TxnState.COMPLETE_ABORT, 7, 3), start_time_ms=NOW_MS - 602_000)
    refused = abort(FakeTransactionAdmin(kafka, [next_batch], v2=False))
    assert "its id has moved on" in (refused or "") and kafka.aborted == []


@pytest.mark.parametrize("epoch", [2, 3])
def test_no_abort_marker_where_its_coordinator_shows_a_commit(epoch: int) -> None:
    """At its epoch (V1) or the next (V2: EndTxn bumps it). Found by the chaos harness on
    4.3.1: a coordinator killed as a batch's EndTxns went out left CompleteCommit at epoch 3
    and no COMMIT marker on a partition that still shows the transaction open at epoch 2
    (KAFKA-20734). Under V1 a commit at the next epoch may be a later transaction, but it
    is no evidence that this one did not commit either."""
    kafka = FakeKafkaAdmin([producer(7, 2, 40)])
    refused = abort(FakeTransactionAdmin(kafka, [described(TxnState.COMPLETE_COMMIT, 7, epoch)]))
    assert "its COMMIT marker never reached this partition" in (refused or "")
    assert "--force" not in (refused or "") and kafka.aborted == []


def test_no_abort_marker_once_its_producer_id_rolled_over() -> None:
    """Red team: under V2 a commit at epoch 32766 moves the id to a new producer id. Listed by
    the old producer id, no coordinator holds it, and it looked unknown, hence abortable."""
    kafka = FakeKafkaAdmin([producer(7, 32766, 40)])
    refused = abort(FakeTransactionAdmin(kafka, [described(TxnState.COMPLETE_COMMIT, 8, 0)]))
    assert "no coordinator holds producer id 7" in (refused or "") and kafka.aborted == []


@pytest.mark.parametrize(
    "now",
    [
        described(TxnState.ONGOING, 7, 4, (("out", 1),)),  # V2: two transactions later
        described(TxnState.ONGOING, 7, 2, (("out", 1),)),  # V1: another one at its epoch
        described(TxnState.EMPTY, 7, 4),  # a new producer of the id, after a fence
        described(TxnState.COMPLETE_ABORT, 7, 5),  # a later transaction, aborted
    ],
    ids=["v2-ongoing", "v1-ongoing", "empty", "later-abort"],
)
def test_no_abort_marker_once_its_id_has_moved_on(now: TxnDescription) -> None:
    """Red team: batch n's COMMIT marker skipped, batch n+1 took the id. What the coordinator
    shows is another transaction; operators run find-hanging once readers stall, which is
    when the query has moved on."""
    kafka = FakeKafkaAdmin([producer(7, 2, 40)])
    refused = abort(FakeTransactionAdmin(kafka, [now]))
    assert "its id has moved on" in (refused or "") and kafka.aborted == []


def test_no_abort_marker_for_an_abort_of_a_transaction_begun_after_the_last_write() -> None:
    """Under V1 the epoch holds many transactions: an abort at it, of one begun after the
    producer's last write here, is a later transaction's, and this one may have committed."""
    kafka = FakeKafkaAdmin([producer(7, 2, 40, last_ms=NOW_MS - 600_000)])
    later = replace(described(TxnState.COMPLETE_ABORT, 7, 2), start_time_ms=NOW_MS - 300_000)
    refused = abort(FakeTransactionAdmin(kafka, [later]))
    assert "began after this producer's last write here" in (refused or "")
    assert kafka.aborted == []


def test_its_coordinator_is_asked_again_just_before_the_marker() -> None:
    """The operator may take minutes to confirm: the id may have moved on meanwhile."""
    kafka = FakeKafkaAdmin([producer(7, 2, 40)])
    admin = FakeTransactionAdmin(kafka, [described(TxnState.COMPLETE_ABORT, 7, 2)])
    [hanging] = find(admin)
    admin.now(described(TxnState.ONGOING, 7, 2, (("out", 1),)))
    assert "its id has moved on" in (abort_hanging(admin, hanging) or "")  # type: ignore[arg-type]
    assert kafka.aborted == []


def test_force_writes_the_marker_without_the_coordinators_evidence() -> None:
    kafka = FakeKafkaAdmin([producer(7, 2, 40)])
    assert abort(FakeTransactionAdmin(kafka, []), force=True) is None
    assert aborted(kafka) == [(7, 2)]


@pytest.mark.parametrize("epoch", [2, 3])
def test_force_never_aborts_a_transaction_its_coordinator_shows_committed(epoch: int) -> None:
    """Red team: --force covers every hanging transaction of the topics, and a commit that
    shows is the mark of KAFKA-20734, the most common kind on 4.x."""
    kafka = FakeKafkaAdmin([producer(7, 2, 40)])
    admin = FakeTransactionAdmin(kafka, [sink_txn(TxnState.COMPLETE_COMMIT, epoch)])
    refused = abort(admin, force=True)
    assert "COMMIT marker never reached" in (refused or "") and kafka.aborted == []


@pytest.mark.parametrize("force", [False, True])
def test_no_abort_marker_once_the_partition_no_longer_has_it_open(force: bool) -> None:
    """Looked at again after the operator's confirmation: what is open now may be another
    transaction of the same producer. Forced or not."""
    kafka = FakeKafkaAdmin([producer(7, 2, 40)])
    admin = FakeTransactionAdmin(kafka, [described(TxnState.COMPLETE_ABORT, 7, 2)])
    [hanging] = find(admin)
    kafka.open_on = [producer(7, 2, 55)]  # ended, and another one began at the same epoch
    refused = abort_hanging(admin, hanging, force=force)  # type: ignore[arg-type]
    assert refused == "not aborted: no longer open on its partition"
    kafka.open_on = [producer(7, 2, 40)]
    assert abort_hanging(admin, hanging, force=force) is None  # type: ignore[arg-type]
    assert aborted(kafka) == [(7, 2)]


SINK_ID = TransactionalIdNaming("orders-sink", "0123abcd").transactional_id(3, 1)


def sink_txn(state: TxnState, epoch: int, **changes: Any) -> TxnDescription:
    """The kafka-eos sink's id (prefix ``orders-sink``) holding producer 7."""
    return replace(described(state, 7, epoch), transactional_id=SINK_ID, **changes)


def commit(admin: FakeTransactionAdmin, prefix: str = "orders-sink") -> str | None:
    [hanging] = find(admin)
    return commit_hanging(admin, hanging, prefix=prefix)  # type: ignore[arg-type]


def test_a_commit_marker_where_a_v2_coordinator_shows_the_sinks_commit_that_ended_it() -> None:
    """KAFKA-20734: CompleteCommit at the next epoch, the partition still open at its own. The
    marker goes out as the coordinator would have written it: at the bumped epoch, with the
    coordinator epoch the partition knows. No clock is compared: the coordinator stamps the
    start when the first partition reaches it, after the records' timestamps (red team)."""
    kafka = FakeKafkaAdmin([producer(7, 2, 40, last_ms=NOW_MS - 600_000)])
    now = sink_txn(TxnState.COMPLETE_COMMIT, 3, start_time_ms=NOW_MS - 599_990)
    admin = FakeTransactionAdmin(kafka, [now])
    assert commit(admin) is None
    assert admin.committed == [(TP, 7, 3, 3)] and kafka.aborted == []


@pytest.mark.parametrize(
    ("now", "v2", "reason"),
    [
        (sink_txn(TxnState.COMPLETE_COMMIT, 3), False, "coordinator of transactions V1"),
        (sink_txn(TxnState.COMPLETE_COMMIT, 2), True, "not the commit of this transaction"),
        (sink_txn(TxnState.PREPARE_COMMIT, 3), True, "not the commit of this transaction"),
        (sink_txn(TxnState.COMPLETE_COMMIT, 4), True, "not the commit of this transaction"),
        (sink_txn(TxnState.COMPLETE_ABORT, 3), True, "not the commit of this transaction"),
        # Red team: a client whose EndTxn keeps the epoch (librdkafka's) on a V2 cluster: an
        # abort at E, an epoch bump, then a commit at E + 1 of another transaction.
        (described(TxnState.COMPLETE_COMMIT, 7, 3), True, "not an id of a kafka-eos sink"),
    ],
    ids=["v1", "same-epoch", "still-committing", "later", "aborted", "not-a-sinks-id"],
)
def test_no_commit_marker_without_the_sinks_commit_of_this_very_transaction(
    now: TxnDescription, v2: bool, reason: str
) -> None:
    """A COMMIT marker makes every open record of the producer on the partition visible."""
    kafka = FakeKafkaAdmin([producer(7, 2, 40)])
    admin = FakeTransactionAdmin(kafka, [now], v2=v2)
    assert reason in (commit(admin) or "") and admin.committed == []


def test_no_commit_marker_over_an_abort_when_a_later_transaction_committed_long_after() -> None:
    """Red team: a task's own abort (librdkafka keeps the epoch) lost its marker here; an hour
    later the slot's next batch committed at the next epoch before transactions V2 was
    finalized (EndTxn v4 keeps it too). Now the coordinator bumps, and the commit at E + 1
    looks like this one's: only its start, long after the last write here, tells."""
    kafka = FakeKafkaAdmin([producer(7, 2, 40, last_ms=NOW_MS - 3_600_000)])
    later = sink_txn(TxnState.COMPLETE_COMMIT, 3, start_time_ms=NOW_MS - 3_000_000)
    admin = FakeTransactionAdmin(kafka, [later])
    assert "began well after this producer's last write" in (commit(admin) or "")
    assert admin.committed == []


def test_no_commit_marker_for_another_sinks_prefix() -> None:
    admin = FakeTransactionAdmin(
        FakeKafkaAdmin([producer(7, 2, 40)]), [sink_txn(TxnState.COMPLETE_COMMIT, 3)]
    )
    assert "not an id of a kafka-eos sink with prefix 'orders'" in (
        commit(admin, prefix="orders") or ""
    )
    assert admin.committed == []


def test_no_commit_marker_where_no_coordinator_holds_the_producer_id() -> None:
    admin = FakeTransactionAdmin(FakeKafkaAdmin([producer(7, 2, 40)]), [])
    assert commit(admin) == "not committed: no coordinator holds producer id 7"
    assert admin.committed == []


def test_no_commit_marker_once_the_partition_no_longer_has_it_open() -> None:
    kafka = FakeKafkaAdmin([producer(7, 2, 40)])
    admin = FakeTransactionAdmin(kafka, [sink_txn(TxnState.COMPLETE_COMMIT, 3)])
    [hanging] = find(admin)
    kafka.open_on = []
    refused = commit_hanging(admin, hanging, prefix="orders-sink")  # type: ignore[arg-type]
    assert refused == "not committed: no longer open on its partition" and admin.committed == []


def test_commit_without_prefix_is_a_usage_error() -> None:
    cluster = ["--bootstrap-servers", "localhost:1", "--topic", "t"]
    result = CliRunner().invoke(txn_command, ["find-hanging", *cluster, "--commit", "--yes"])
    assert result.exit_code == 2 and "--commit needs --prefix" in result.output


def test_force_without_abort_is_a_usage_error() -> None:
    result = CliRunner().invoke(
        txn_command,
        ["find-hanging", "--bootstrap-servers", "localhost:1", "--topic", "t", "--force"],
    )
    assert result.exit_code == 2 and "--force only changes --abort" in result.output


def test_commit_and_forced_abort_report_each_refusal_and_abort_nothing_committed() -> None:
    """Red team: under V1 --commit refuses a commit at its epoch; the forced abort then must not
    drop it, and the report keeps both reasons."""
    kafka = FakeKafkaAdmin([producer(7, 2, 40)])
    admin = FakeTransactionAdmin(kafka, [sink_txn(TxnState.COMPLETE_COMMIT, 2)], v2=False)
    [hanging] = find(admin)
    entry = _end_one(
        SimpleNamespace(admin=admin),  # type: ignore[arg-type]
        hanging,
        NOW_MS,
        commit="orders-sink",
        abort=True,
        force=True,
    )
    assert (entry["committed"], entry["aborted"], kafka.aborted) == (False, False, [])
    assert "not committed" in (entry["error"] or "") and "not aborted" in (entry["error"] or "")
