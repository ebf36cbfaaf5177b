"""The split form the Spark sink uses: every call on a fresh instance, as in Spark's driver."""

from __future__ import annotations

import logging

import pytest

from checkpoint.errors import CheckpointAborted, CheckpointCommitFailed, ProtocolError
from checkpoint.model import Committable, Snapshot
from checkpoint.store import SnapshotStore
from checkpoint.testing import InMemoryBroker, InMemoryParticipant
from checkpoint.two_phase_commit import TwoPhaseCommit


class FlakyCommitter(InMemoryParticipant):
    failures = 0

    def commit(self, committable: Committable) -> None:
        if FlakyCommitter.failures:
            FlakyCommitter.failures -= 1
            raise TimeoutError("EndTxn timed out")
        super().commit(committable)

    def abort(self, committable: Committable) -> None:
        if committable.transactional_id.endswith("-broken"):
            raise ConnectionError("broker unreachable")
        super().abort(committable)


@pytest.fixture(autouse=True)
def _no_leftover_failures() -> None:
    FlakyCommitter.failures = 0


def driver(store: SnapshotStore, broker: InMemoryBroker) -> TwoPhaseCommit:
    """A new driver-side process: a new store handle and a committer built from config."""
    return TwoPhaseCommit(SnapshotStore(store.location, retain=3), FlakyCommitter(broker, "sink"))


def batch(broker: InMemoryBroker, batch_id: int, tasks: int = 2) -> list[Committable]:
    messages = []
    for task_id in range(tasks):
        task = InMemoryParticipant(broker, f"sink-{task_id}")
        task.begin_transaction(batch_id)
        task.write(batch_id, (batch_id, task_id))
        messages.append(task.pre_commit(batch_id))
    return messages


def test_commit_of_a_batch(store: SnapshotStore, broker: InMemoryBroker) -> None:
    snapshot = driver(store, broker).complete(0, batch(broker, 0))
    assert snapshot == store.get(0) and store.is_confirmed(0)
    assert sorted(broker.visible) == [(0, 0), (0, 1)]


def test_replay_of_a_decided_batch_keeps_the_recorded_decision(
    store: SnapshotStore, broker: InMemoryBroker
) -> None:
    first = driver(store, broker).complete(3, batch(broker, 3))
    # Spark replays batch 3 (crash before commits/3); a buggy task wrote it again anyway.
    extra = batch(broker, 3, tasks=1)
    assert driver(store, broker).complete(3, extra) == first
    assert sorted(broker.visible) == [(3, 0), (3, 1)] and broker.lingering() == []


def test_replay_re_drives_an_unconfirmed_decision(
    store: SnapshotStore, broker: InMemoryBroker
) -> None:
    FlakyCommitter.failures = 1
    with pytest.raises(CheckpointCommitFailed):
        driver(store, broker).complete(1, batch(broker, 1))
    assert driver(store, broker).complete(1, []).checkpoint_id == 1
    assert sorted(broker.visible) == [(1, 0), (1, 1)] and store.is_confirmed(1)


def test_abort_after_a_failed_commit_never_drops_the_decided_batch(
    store: SnapshotStore, broker: InMemoryBroker
) -> None:
    messages = batch(broker, 5)
    FlakyCommitter.failures = 2
    with pytest.raises(CheckpointCommitFailed):
        driver(store, broker).complete(5, messages)
    driver(store, broker).abort(5, messages)  # what Spark does when commit() raised
    assert broker.visible == [] and len(broker.lingering()) == 2
    assert driver(store, broker).recover().recommitted == (5,)
    assert sorted(broker.visible) == [(5, 0), (5, 1)]


def test_abort_of_an_undecided_batch(store: SnapshotStore, broker: InMemoryBroker) -> None:
    driver(store, broker).abort(2, batch(broker, 2))
    assert broker.lingering() == [] and store.get(2) is None


def test_abort_failures_are_logged_not_raised(
    store: SnapshotStore, broker: InMemoryBroker, caplog: pytest.LogCaptureFixture
) -> None:
    broken = Committable("sink-0-broken", 1, 0, 1)
    with caplog.at_level(logging.WARNING):
        driver(store, broker).abort(2, [broken])
    assert "sink-0-broken" in caplog.text


def test_a_stale_batch_is_aborted(store: SnapshotStore, broker: InMemoryBroker) -> None:
    driver(store, broker).complete(5, batch(broker, 5))
    with pytest.raises(CheckpointAborted, match="stale"):
        driver(store, broker).complete(4, batch(broker, 4))
    assert all(record[0] == 5 for record in broker.visible) and broker.lingering() == []


def test_recover_commits_the_decided_and_aborts_the_rest(
    store: SnapshotStore, broker: InMemoryBroker
) -> None:
    driver(store, broker).complete(0, batch(broker, 0))
    decided = batch(broker, 1)
    store.write(Snapshot(1, "kafka-eos", tuple(decided)))  # the driver died after step 3
    batch(broker, 2)  # batch 2's tasks pre-committed; the driver died before step 3
    recovery = driver(store, broker).recover()
    assert recovery.recommitted == (1,) and recovery.snapshot.checkpoint_id == 1
    assert sorted(broker.visible) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert broker.lingering() == []


def test_the_same_transactional_id_twice_is_a_protocol_error(
    store: SnapshotStore, broker: InMemoryBroker
) -> None:
    [message] = batch(broker, 0, tasks=1)
    with pytest.raises(ProtocolError, match="twice"):
        driver(store, broker).complete(0, [message, message])


class UnprunableStore(SnapshotStore):
    def prune(self) -> list[int]:
        raise PermissionError("delete denied")


class UnreadableStore(SnapshotStore):
    def get(self, checkpoint_id: int) -> Snapshot | None:
        raise OSError("read timed out")


def test_a_failed_prune_is_logged_not_raised(
    store: SnapshotStore, broker: InMemoryBroker, caplog: pytest.LogCaptureFixture
) -> None:
    driver = TwoPhaseCommit(UnprunableStore(store.location), FlakyCommitter(broker, "sink"))
    with caplog.at_level(logging.WARNING):
        snapshot = driver.complete(0, batch(broker, 0))
    assert snapshot == store.get(0) and store.is_confirmed(0)  # the batch landed
    assert sorted(broker.visible) == [(0, 0), (0, 1)]
    assert store.location in caplog.text and "delete denied" in caplog.text


def test_abort_aborts_nothing_when_the_decision_cannot_be_read(
    store: SnapshotStore, broker: InMemoryBroker, caplog: pytest.LogCaptureFixture
) -> None:
    messages = batch(broker, 5)
    FlakyCommitter.failures = 2
    with pytest.raises(CheckpointCommitFailed):
        driver(store, broker).complete(5, messages)  # decided, nothing committed
    blind = TwoPhaseCommit(UnreadableStore(store.location), FlakyCommitter(broker, "sink"))
    with caplog.at_level(logging.WARNING):
        blind.abort(5, messages)  # aborting blindly would drop decided batch 5
    assert len(broker.lingering()) == 2 and "read timed out" in caplog.text
    assert driver(store, broker).recover().recommitted == (5,)
    assert sorted(broker.visible) == [(5, 0), (5, 1)]


def test_a_failed_commit_carries_every_error_in_order(
    store: SnapshotStore, broker: InMemoryBroker
) -> None:
    """The caller looks for the error that means loss; it need not be the first."""
    FlakyCommitter.failures = 2
    with pytest.raises(CheckpointCommitFailed) as failed:
        driver(store, broker).complete(5, batch(broker, 5))
    assert [type(e) for e in failed.value.errors] == [TimeoutError, TimeoutError]
    assert failed.value.failed == ("sink-0-5", "sink-1-5")
    assert failed.value.__cause__ is failed.value.errors[0]
