"""The loop around the judgement (connectors.kafka.sink.marker_repair.settle): what it looks at
again, what it writes once, and what stops it; and when the sink runs it
(connectors.kafka.sink.commit_path.settle_newest_decision). The brokers are scripted, one
answer a look; the judgement itself is tests/sink/test_owed_markers.py, and real brokers that
skip a marker are integration_tests/sink/test_skipped_commit_markers.py."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import SimpleNamespace

import kafka.errors as Errors
import pytest
from kafka.structs import TopicPartition

from checkpoint.deadline import Deadline
from checkpoint.errors import DeadlineExceeded
from checkpoint.model import Committable, Snapshot
from checkpoint.store import SnapshotStore
from connectors.kafka.partition_txns import BatchHeader, OpenOnPartition
from connectors.kafka.sink import commit_path, marker_repair
from connectors.kafka.sink.errors import AbortMarkerSkippedError, CommitMarkerSkippedError
from connectors.kafka.sink.naming import TransactionalIdNaming
from connectors.kafka.sink.owed_markers import Reason
from connectors.kafka.txn_state import TxnDescription, TxnState

P, E, START = 4_000, 7, 1_700_000_000_000
TP = TopicPartition("out", 0)
C = Committable("q-0a1b2c3d-0-0", P, E, 10, ((TP.topic, TP.partition),), START)
OPEN = OpenOnPartition(TP.topic, TP.partition, P, E, 3, 120, START + 500)
COMMITTED = TxnDescription(
    C.transactional_id, TxnState.COMPLETE_COMMIT, P, E + 1, 1, 60_000, START, ()
)
NAMING = TransactionalIdNaming("q", "0a1b2c3d")
# Another task's transaction, fenced by the driver under V2 (the epoch moved on to F + 1), open
# on another partition of the topic: its ABORT marker was skipped.
Q, F, TP2 = 5_000, 2, TopicPartition("out", 1)
ABORTED_ID = NAMING.transactional_id(1, 0)
FENCED = marker_repair.Fenced(ABORTED_ID, Q, F, ((TP2.topic, TP2.partition),))
ABORTED_OPEN = OpenOnPartition(TP2.topic, TP2.partition, Q, F, 4, 60, START + 700)
ABORTED = TxnDescription(ABORTED_ID, TxnState.COMPLETE_ABORT, Q, F + 1, 1, 60_000, START, ())
# What a look finds on the partition: the screen's answer, or an error it raises.
Look = list[OpenOnPartition] | Exception


@dataclass
class Brokers:
    """The partition's leader and the id's coordinator, one scripted answer per look (the last
    repeats), and an error the first marker meets; the markers written, and how often the
    admin was rebuilt."""

    looks: list[Look]
    coordinator: TxnDescription | None = COMMITTED
    write_error: Exception | None = None
    markers: list[tuple[TopicPartition, int, int, int]] = field(default_factory=list)
    reconnects: int = 0
    views: dict[str, TxnDescription | None] = field(default_factory=dict)  # other ids'
    v2: bool = True  # the coordinators move the epoch on when they end a transaction
    aborts: list[tuple[TopicPartition, int, int, int, bool]] = field(default_factory=list)
    current: list[OpenOnPartition] = field(default_factory=list)

    def screen(self) -> list[TopicPartition]:
        """The look's first read; its DescribeProducers then answers ``current``."""
        answer = self.looks.pop(0) if len(self.looks) > 1 else self.looks[0]
        if isinstance(answer, Exception):
            raise answer
        self.current = answer
        return sorted({TopicPartition(o.topic, o.partition) for o in answer})

    # The TransactionAdmin the loop asks.
    kafka_admin = None

    def describe(self, ids: list[str], *, deadline: Deadline) -> dict[str, TxnDescription | None]:
        return {i: self.views.get(i, self.coordinator) for i in ids}

    def write_abort_marker(
        self, tp: TopicPartition, producer_id: int, epoch: int, coordinator_epoch: int, *,
        guarded: bool,
    ) -> None:  # fmt: skip
        if self.write_error is not None:
            error, self.write_error = self.write_error, None  # once
            raise error
        self.aborts.append((tp, producer_id, epoch, coordinator_epoch, guarded))

    def first_batch_at(self, tp: TopicPartition, offset: int, *, deadline: Deadline) -> BatchHeader:
        return BatchHeader(offset, P, E, True)

    def epoch_bumps_on_end_at(self, node_id: int, *, deadline: Deadline) -> bool:
        return self.v2

    def write_commit_marker(
        self, tp: TopicPartition, producer_id: int, epoch: int, coordinator_epoch: int
    ) -> None:
        if self.write_error is not None:
            error, self.write_error = self.write_error, None  # once
            raise error
        self.markers.append((tp, producer_id, epoch, coordinator_epoch))

    def reconnect(self) -> Brokers:
        self.reconnects += 1
        return self


@pytest.fixture
def brokers(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Brokers]]:
    """Brokers whose leader answers the loop's screen and DescribeProducers from the script;
    no pause between looks."""
    made: list[Brokers] = []

    def make(*looks: Look, **kwargs: object) -> Brokers:
        b = Brokers(list(looks), **kwargs)  # type: ignore[arg-type]
        made.append(b)
        return b

    monkeypatch.setattr(marker_repair, "unstable_partitions", lambda *_, **__: made[-1].screen())
    monkeypatch.setattr(marker_repair, "open_on_partitions", lambda *_: made[-1].current)
    monkeypatch.setattr(marker_repair.time, "sleep", lambda s: None)
    yield make


def settle(b: Brokers, timeout_s: float = 5.0, *, fenced: bool = False) -> list[TopicPartition]:
    """The decision's COMMIT markers; with ``fenced``, right after the driver fenced the
    transaction open on ``TP2`` (``FENCED``): its ABORT markers."""
    deadline = Deadline(timeout_s)
    if fenced:
        return marker_repair.settle_fenced(b, [FENCED], deadline=deadline, reconnect=b.reconnect)  # type: ignore[arg-type]
    return marker_repair.settle(b, 3, [C], deadline=deadline, reconnect=b.reconnect)  # type: ignore[arg-type]


def test_an_owed_marker_is_written_once_and_confirmed_by_the_next_look(brokers) -> None:
    b = brokers([OPEN], [])
    assert settle(b) == [TP]
    assert b.markers == [(TP, P, E + 1, 3)]


def test_nothing_open_writes_nothing(brokers) -> None:
    b = brokers([])
    assert settle(b) == [] and b.markers == []


@pytest.mark.timeout(10)  # without the check, the loop would write a marker at every look
def test_a_range_still_open_after_its_marker_stops_without_a_second_marker(brokers) -> None:
    b = brokers([OPEN])
    with pytest.raises(CommitMarkerSkippedError) as raised:
        settle(b)
    assert raised.value.reason is Reason.INCONSISTENT and not raised.value.waits
    assert raised.value.repaired == [(TP.topic, TP.partition)]
    assert len(b.markers) == 1


def test_a_leader_that_does_not_answer_is_asked_again_through_a_new_admin(brokers) -> None:
    b = brokers(Errors.KafkaTimeoutError("no leader"), [OPEN], [])
    assert settle(b) == [TP]
    assert b.reconnects == 1 and len(b.markers) == 1


@pytest.mark.parametrize("fenced", [False, True], ids=["COMMIT", "ABORT"])
def test_a_marker_whose_leader_the_admin_cannot_reach_is_written_through_a_new_admin(
    brokers, fenced: bool
) -> None:
    """A leader that restarted while the admin was built is unknown to its client (kafka-python
    answers UnknownBrokerIdError until its metadata is read again): the write's retries run
    out, and the next look goes through a new admin (a CI rehearsal's fence failed with the
    raw DeadlineExceeded and left the range open)."""
    timeout = DeadlineExceeded("ApiVersions of broker 2: UnknownBrokerIdError(2)")
    if fenced:
        b = brokers([ABORTED_OPEN], [ABORTED_OPEN], [], coordinator=ABORTED, write_error=timeout)
        assert settle(b, fenced=True) == [TP2]
        assert len(b.aborts) == 1
    else:
        b = brokers([OPEN], [OPEN], [], write_error=timeout)
        assert settle(b) == [TP]
        assert len(b.markers) == 1
    assert b.reconnects == 1


def test_a_leader_offline_past_the_deadline_stops_and_says_a_restart_looks_again(
    brokers,
) -> None:
    b = brokers(Errors.KafkaTimeoutError("no leader"))
    with pytest.raises(CommitMarkerSkippedError) as raised:
        settle(b, timeout_s=0.05)
    assert raised.value.reason is Reason.LEADER_OFFLINE and raised.value.waits
    assert raised.value.partition is None and b.markers == []


@pytest.mark.parametrize(
    "error", [Errors.TopicAuthorizationFailedError(), Errors.ClusterAuthorizationFailedError()]
)
def test_a_refused_look_stops_at_once_naming_the_acls(brokers, error: Exception) -> None:
    b = brokers(error)
    with pytest.raises(CommitMarkerSkippedError) as raised:
        settle(b, timeout_s=2)
    assert raised.value.reason is Reason.NOT_AUTHORIZED and not raised.value.waits
    assert "--operation ClusterAction --cluster" in str(raised.value)
    assert b.reconnects == 0  # not waited on as if a leader were offline


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (Errors.UnsupportedVersionError(), Reason.UNSUPPORTED),
        (Errors.ClusterAuthorizationFailedError(), Reason.NOT_AUTHORIZED),
    ],
)
def test_a_refused_marker_stops_at_once(brokers, error: Exception, reason: Reason) -> None:
    b = brokers([OPEN], write_error=error)
    with pytest.raises(CommitMarkerSkippedError) as raised:
        settle(b, timeout_s=2)
    assert raised.value.reason is reason and not raised.value.waits
    assert raised.value.partition == (TP.topic, TP.partition) and raised.value.repaired == []


def test_a_coordinator_still_writing_markers_is_waited_for_then_stops_as_a_wait(brokers) -> None:
    b = brokers([OPEN], coordinator=replace(COMMITTED, state=TxnState.PREPARE_COMMIT))
    with pytest.raises(CommitMarkerSkippedError) as raised:
        settle(b, timeout_s=0.05)
    assert raised.value.reason is Reason.COORDINATOR_PREPARING and raised.value.waits
    assert b.markers == []


def test_a_range_the_coordinators_own_marker_closes_is_left_to_it(brokers) -> None:
    """The first look finds the range open while the coordinator still writes its markers; the
    next finds it closed: nothing written, nothing reported repaired."""
    b = brokers([OPEN], [], coordinator=replace(COMMITTED, state=TxnState.PREPARE_COMMIT))
    assert settle(b) == [] and b.markers == []


# -- the ABORT markers of the transactions the driver fences --------------------------------------


def test_a_skipped_abort_marker_is_written_right_after_the_fence(brokers) -> None:
    """Its ABORT marker at the epoch the fence moved to, guarded (V2); then the range is
    closed, and a task that takes the id again cannot join the aborted records."""
    b = brokers([ABORTED_OPEN], [], views={ABORTED_ID: ABORTED})
    assert settle(b, fenced=True) == [TP2]
    assert b.aborts == [(TP2, Q, F + 1, 4, True)] and b.markers == []


def test_a_fence_under_v1_gets_a_legacy_abort_marker_at_the_fenced_epoch(brokers) -> None:
    b = brokers([ABORTED_OPEN], [], views={ABORTED_ID: ABORTED}, v2=False)
    assert settle(b, fenced=True) == [TP2]
    assert b.aborts == [(TP2, Q, F + 1, 4, False)]


def test_a_fence_whose_markers_all_landed_writes_nothing(brokers) -> None:
    b = brokers([], views={ABORTED_ID: ABORTED})
    assert settle(b, fenced=True) == [] and b.aborts == []


def test_another_producer_open_on_the_partition_is_left_alone(brokers) -> None:
    """The batch's own pre-committed transactions share the fenced one's partitions."""
    other = replace(ABORTED_OPEN, producer_id=Q + 1)
    b = brokers([other], views={ABORTED_ID: ABORTED})
    assert settle(b, fenced=True) == [] and b.aborts == []


def test_an_abort_begun_long_after_the_last_write_is_no_evidence(brokers) -> None:
    late = replace(ABORTED, start_time_ms=ABORTED_OPEN.last_timestamp_ms + 61_000)
    b = brokers([ABORTED_OPEN], views={ABORTED_ID: late})
    with pytest.raises(AbortMarkerSkippedError) as raised:
        settle(b, fenced=True)
    assert raised.value.reason is Reason.INCONSISTENT and b.aborts == []


def test_a_later_transaction_of_the_id_that_joined_the_range_is_left_to_its_own_end(
    brokers,
) -> None:
    """A zombie took the id after the fence and wrote there: the range is its transaction's
    now, open at its coordinator, and its own end (the next sweep's fence) ends it."""
    joined = replace(ABORTED_OPEN, producer_epoch=F + 2)
    ongoing = replace(ABORTED, state=TxnState.ONGOING, epoch=F + 2, start_time_ms=START + 9_000)
    b = brokers([joined], views={ABORTED_ID: ongoing})
    assert settle(b, fenced=True) == [] and b.aborts == []


def test_an_abort_still_being_written_is_waited_for(brokers) -> None:
    aborting = replace(ABORTED, state=TxnState.PREPARE_ABORT)
    b = brokers([ABORTED_OPEN], views={ABORTED_ID: aborting})
    with pytest.raises(AbortMarkerSkippedError) as raised:
        settle(b, timeout_s=0.05, fenced=True)
    assert raised.value.reason is Reason.COORDINATOR_PREPARING and raised.value.waits
    assert raised.value.transactional_id == ABORTED_ID and b.aborts == []


def test_a_leader_offline_past_the_deadline_stops_and_names_the_fenced_partitions(
    brokers,
) -> None:
    b = brokers(Errors.KafkaTimeoutError("no leader"))
    with pytest.raises(AbortMarkerSkippedError) as raised:
        settle(b, timeout_s=0.05, fenced=True)
    assert raised.value.reason is Reason.LEADER_OFFLINE and raised.value.waits
    assert raised.value.partitions == [(TP2.topic, TP2.partition)] and b.aborts == []
    assert "--topic out" in str(raised.value)


@pytest.mark.parametrize(
    "view",
    [
        replace(ABORTED, state=TxnState.COMPLETE_COMMIT),  # a commit: an abort would lose it
        replace(ABORTED, state=TxnState.ONGOING, epoch=F + 1, start_time_ms=START + 9_000),
        None,
    ],
    ids=["committed", "moved on", "unknown"],
)
def test_without_the_abort_that_ended_it_no_marker_is_written(brokers, view) -> None:
    b = brokers([ABORTED_OPEN], views={ABORTED_ID: view})
    with pytest.raises(AbortMarkerSkippedError) as raised:
        settle(b, fenced=True)
    assert raised.value.reason is Reason.INCONSISTENT and not raised.value.waits
    assert "find-hanging" in str(raised.value) and b.aborts == []


@pytest.mark.timeout(10)
def test_a_range_still_open_after_its_abort_marker_stops(brokers) -> None:
    b = brokers([ABORTED_OPEN], views={ABORTED_ID: ABORTED})
    with pytest.raises(AbortMarkerSkippedError) as raised:
        settle(b, fenced=True)
    assert raised.value.reason is Reason.INCONSISTENT and len(b.aborts) == 1


# -- when the settle runs (commit_path.settle_newest_decision) ------------------------------------


@dataclass
class Settles:
    """A committer that records which decisions it was asked to settle."""

    asked: list[tuple[int, tuple[Committable, ...]]] = field(default_factory=list)

    def settle_markers(self, cid: int, committables: list[Committable]) -> list[TopicPartition]:
        self.asked.append((cid, tuple(committables)))
        return []


def _decide(location: Path, cid: int, decided_at_ms: int, *, confirm: bool = True) -> None:
    store = SnapshotStore(location)
    store.write(Snapshot(cid, "q", (C,), decided_at_ms=decided_at_ms))
    if confirm:
        store.confirm(cid)


def _settle_newest(location: Path, committer: Settles) -> None:
    protocol = SimpleNamespace(store=SnapshotStore(location))
    commit_path.settle_newest_decision(protocol, committer)  # type: ignore[arg-type]


def test_a_decision_is_settled_once_per_process_and_a_remade_one_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spark may build a batch's writer twice: the second build looks at nothing. A checkpoint
    deleted and made again reuses its ids; its decision, taken later, is another one."""
    monkeypatch.setattr(commit_path, "_SETTLED", set())
    location, committer = tmp_path / "decisions", Settles()
    _decide(location, 3, decided_at_ms=1_000)
    _settle_newest(location, committer)
    _settle_newest(location, committer)
    assert committer.asked == [(3, (C,))]

    shutil.rmtree(location)
    _decide(location, 3, decided_at_ms=2_000)
    _settle_newest(location, committer)
    assert committer.asked == [(3, (C,)), (3, (C,))]


def test_an_unconfirmed_decision_is_not_settled(tmp_path: Path, monkeypatch) -> None:
    """Recovery raised before confirming it: nothing of it is known committed."""
    monkeypatch.setattr(commit_path, "_SETTLED", set())
    location, committer = tmp_path / "decisions", Settles()
    _decide(location, 3, decided_at_ms=1_000, confirm=False)
    _settle_newest(location, committer)
    assert committer.asked == []
