"""The in-process coordinator loop: trigger, acknowledge, decline, timeouts, pauses, recovery."""

from __future__ import annotations

import pytest

from checkpoint.errors import (
    CheckpointAborted,
    CheckpointCommitFailed,
    CheckpointRejected,
    CheckpointTimeout,
    ConfigError,
    ProtocolError,
)
from checkpoint.model import Committable
from checkpoint.reference_coordinator import Coordinator, CoordinatorConfig
from checkpoint.store import SnapshotStore
from checkpoint.testing import InMemoryBroker, InMemoryParticipant, ManualClock


class SimulatedCrash(BaseException):
    """The process dies here."""


class SpyCommitter(InMemoryParticipant):
    """Records whether the decision was durable at each commit; can fail or crash on demand."""

    def __init__(self, broker: InMemoryBroker, store: SnapshotStore) -> None:
        super().__init__(broker, "app")
        self.store = store
        self.decided_at_commit: list[bool] = []
        self.fail_next: BaseException | None = None

    def commit(self, committable: Committable) -> None:
        if self.fail_next is not None:
            error, self.fail_next = self.fail_next, None
            raise error
        cid = int(committable.transactional_id.rsplit("-", 1)[1])
        self.decided_at_commit.append(self.store.contains(cid))
        super().commit(committable)


@pytest.fixture
def committer(broker: InMemoryBroker, store: SnapshotStore) -> SpyCommitter:
    return SpyCommitter(broker, store)


@pytest.fixture
def tasks(broker: InMemoryBroker) -> dict[str, InMemoryParticipant]:
    return {name: InMemoryParticipant(broker, name) for name in ("app-0", "app-1")}


def make(store: SnapshotStore, committer: SpyCommitter, clock: ManualClock, **config: object):
    coordinator = Coordinator(store, committer, CoordinatorConfig(**config), clock=clock)  # type: ignore[arg-type]
    coordinator.recover()
    return coordinator


def run(tasks: dict[str, InMemoryParticipant], cid: int) -> dict[str, Committable]:
    """Each task writes one record and pre-commits: the barrier reached it."""
    for name, task in tasks.items():
        task.begin_transaction(cid)
        task.write(cid, f"{name}@{cid}")
    return {name: task.pre_commit(cid) for name, task in tasks.items()}


def acknowledged_by_app_0(
    coordinator: Coordinator, tasks: dict[str, InMemoryParticipant], **trigger: object
) -> tuple[int, dict[str, Committable]]:
    """A checkpoint triggered with ``trigger``'s arguments whose barrier reached both tasks,
    acknowledged by app-0 only: its id, and the committables (app-1's is the test's to send)."""
    cid = coordinator.trigger(tasks, **trigger)  # type: ignore[arg-type]
    acks = run(tasks, cid)
    coordinator.acknowledge(cid, "app-0", acks["app-0"])
    return cid, acks


def test_happy_path_decides_before_it_notifies(store, committer, clock, tasks, broker) -> None:
    coordinator = make(store, committer, clock)
    cid = coordinator.trigger(tasks, source_offsets={("in", 0): 42})
    acks = run(tasks, cid)
    assert coordinator.acknowledge(cid, "app-0", acks["app-0"]) == []
    assert broker.visible == []  # one participant is still missing
    [snapshot] = coordinator.acknowledge(cid, "app-1", acks["app-1"])
    assert snapshot == store.latest() and snapshot.offsets() == {("in", 0): 42}
    assert set(snapshot.committables) == set(acks.values())
    assert committer.decided_at_commit == [True, True]
    assert sorted(broker.visible) == ["app-0@0", "app-1@0"]
    assert store.is_confirmed(cid) and coordinator.pending_ids == ()


def test_trigger_needs_recover_first(store, committer, clock) -> None:
    with pytest.raises(CheckpointRejected, match="recover"):
        Coordinator(store, committer, clock=clock).trigger(["app-0"])


def test_timeout_aborts_and_late_acknowledgements_are_rolled_back(
    store, committer, clock, tasks, broker
) -> None:
    coordinator = make(store, committer, clock, timeout=10.0)
    cid, acks = acknowledged_by_app_0(coordinator, tasks)
    clock.advance(10.0)
    assert coordinator.tick() == [cid]
    with pytest.raises(CheckpointAborted, match="acknowledged after it ended"):
        coordinator.acknowledge(cid, "app-1", acks["app-1"])
    assert broker.visible == [] and broker.lingering() == [] and store.latest() is None


def test_timeout_is_enforced_when_the_last_acknowledgement_arrives(
    store, committer, clock, tasks, broker
) -> None:
    coordinator = make(store, committer, clock, timeout=10.0)
    cid, acks = acknowledged_by_app_0(coordinator, tasks)
    clock.advance(11.0)
    with pytest.raises(CheckpointTimeout, match=r"no acknowledgement within 10\.0 s"):
        coordinator.acknowledge(cid, "app-1", acks["app-1"])
    assert broker.visible == [] and store.latest() is None


def test_a_decline_aborts_the_checkpoint(store, committer, clock, tasks, broker) -> None:
    coordinator = make(store, committer, clock)
    cid, _ = acknowledged_by_app_0(coordinator, tasks)
    assert coordinator.decline(cid, "app-1", "disk full") == [cid]
    assert coordinator.decline(cid, "app-1", "again") == []
    assert [t.transactional_id for t in broker.lingering()] == ["app-1-0"]  # for recover()
    coordinator.recover()
    assert broker.visible == [] and broker.lingering() == []


def test_a_failed_commit_keeps_the_decision_and_recover_finishes_it(
    store, committer, clock, tasks, broker
) -> None:
    coordinator = make(store, committer, clock)
    cid, acks = acknowledged_by_app_0(coordinator, tasks)
    committer.fail_next = TimeoutError("broker unavailable")
    with pytest.raises(CheckpointCommitFailed, match="is decided but 1 transaction"):
        coordinator.acknowledge(cid, "app-1", acks["app-1"])
    assert store.unconfirmed_ids() == [cid]
    with pytest.raises(CheckpointRejected, match=r"recover\(\) has not completed"):
        coordinator.trigger(tasks)
    assert coordinator.recover().recommitted == (cid,)
    assert sorted(broker.visible) == ["app-0@0", "app-1@0"] and store.is_confirmed(cid)
    coordinator.trigger(tasks)


def test_minimum_pause_between_checkpoints(store, committer, clock, tasks) -> None:
    coordinator = make(store, committer, clock, min_pause=5.0)
    cid = coordinator.trigger(tasks)
    for name, committable in run(tasks, cid).items():
        coordinator.acknowledge(cid, name, committable)
    clock.advance(2.0)
    with pytest.raises(CheckpointRejected, match="min_pause") as raised:
        coordinator.trigger(tasks)
    assert raised.value.retry_after == pytest.approx(3.0)
    clock.advance(3.0)
    assert coordinator.trigger(tasks) == cid + 1


def test_max_concurrent_one_rejects_a_second_trigger(store, committer, clock, tasks) -> None:
    coordinator = make(store, committer, clock)
    coordinator.trigger(tasks)
    with pytest.raises(CheckpointRejected, match="max_concurrent=1"):
        coordinator.trigger(tasks)


def test_concurrent_checkpoints_are_decided_in_id_order(
    store, committer, clock, tasks, broker
) -> None:
    coordinator = make(store, committer, clock, max_concurrent=2)
    first, second = coordinator.trigger(tasks), coordinator.trigger(tasks)
    acks_first, acks_second = run(tasks, first), run(tasks, second)
    for name, committable in acks_second.items():
        assert coordinator.acknowledge(second, name, committable) == []
    assert broker.visible == []  # the younger one waits for the older decision
    coordinator.acknowledge(first, "app-0", acks_first["app-0"])
    decided = coordinator.acknowledge(first, "app-1", acks_first["app-1"])
    assert [s.checkpoint_id for s in decided] == [first, second]


def test_aborting_a_checkpoint_aborts_the_younger_ones(store, committer, clock, tasks) -> None:
    coordinator = make(store, committer, clock, max_concurrent=3)
    ids = [coordinator.trigger(tasks) for _ in range(3)]
    assert coordinator.decline(ids[1], "app-0", "boom") == ids[1:]
    assert coordinator.pending_ids == (ids[0],)


def test_restart_after_a_crash_between_decision_and_notify(
    store, committer, clock, tasks, broker
) -> None:
    coordinator = make(store, committer, clock)
    cid, acks = acknowledged_by_app_0(coordinator, tasks, source_offsets={("in", 0): 7})
    committer.fail_next = SimulatedCrash("killed after the decision write")
    with pytest.raises(SimulatedCrash):
        coordinator.acknowledge(cid, "app-1", acks["app-1"])
    stray = InMemoryParticipant(broker, "app-0")
    stray.begin_transaction(cid + 1)  # an open transaction of the dead run
    restarted = Coordinator(store, SpyCommitter(broker, store), clock=clock)
    recovery = restarted.recover()
    assert recovery.recommitted == (cid,) and recovery.snapshot.offsets() == {("in", 0): 7}
    assert sorted(broker.visible) == ["app-0@0", "app-1@0"] and broker.lingering() == []
    assert restarted.trigger(tasks) == cid + 1


def test_recover_on_a_live_coordinator_aborts_in_flight_checkpoints(
    store, committer, clock, tasks, broker
) -> None:
    coordinator = make(store, committer, clock)
    cid, _ = acknowledged_by_app_0(coordinator, tasks)
    assert coordinator.recover().aborted == (cid,)
    assert broker.lingering() == [] and coordinator.trigger(tasks) == cid + 1


def test_protocol_misuse_is_reported(store, committer, clock, tasks) -> None:
    coordinator = make(store, committer, clock)
    cid = coordinator.trigger(tasks, checkpoint_id=41)
    assert cid == 41
    acks = run(tasks, cid)
    with pytest.raises(ProtocolError, match="not 'stranger'"):
        coordinator.acknowledge(cid, "stranger", None)
    coordinator.acknowledge(cid, "app-0", acks["app-0"])
    coordinator.acknowledge(cid, "app-0", acks["app-0"])  # a duplicate is harmless
    with pytest.raises(ProtocolError, match="twice"):
        coordinator.acknowledge(cid, "app-0", None)
    coordinator.acknowledge(cid, "app-1", acks["app-1"])
    assert coordinator.acknowledge(cid, "app-1", acks["app-1"]) == []  # after the decision
    with pytest.raises(ProtocolError, match="must increase"):
        coordinator.trigger(tasks, checkpoint_id=41)
    with pytest.raises(ProtocolError, match="at least one"):
        coordinator.trigger([])


@pytest.mark.parametrize(
    "config",
    [{"timeout": 0}, {"min_pause": -1}, {"max_concurrent": 0}, {"pipeline_id": ""}],
)
def test_invalid_configuration_is_rejected(config: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match=next(iter(config))):
        CoordinatorConfig(**config)  # type: ignore[arg-type]


def test_after_a_failed_commit_younger_checkpoints_wait_for_recover(
    store, committer, clock, tasks, broker
) -> None:
    coordinator = make(store, committer, clock, max_concurrent=2)
    first, second = coordinator.trigger(tasks), coordinator.trigger(tasks)
    acks_first, acks_second = run(tasks, first), run(tasks, second)
    coordinator.acknowledge(first, "app-0", acks_first["app-0"])
    committer.fail_next = TimeoutError("broker unavailable")
    with pytest.raises(CheckpointCommitFailed):
        coordinator.acknowledge(first, "app-1", acks_first["app-1"])
    for name, committable in acks_second.items():  # deciding these would overtake `first`
        with pytest.raises(CheckpointRejected, match=r"call recover\(\)"):
            coordinator.acknowledge(second, name, committable)
    assert not [r for r in broker.visible if r.endswith("@1")]
    assert store.latest().checkpoint_id == first
    recovery = coordinator.recover()
    assert recovery.recommitted == (first,) and recovery.aborted == (second,)
    assert sorted(broker.visible) == ["app-0@0", "app-1@0"] and broker.lingering() == []


def test_trigger_rejects_a_bare_string(store, committer, clock) -> None:
    coordinator = make(store, committer, clock)
    with pytest.raises(ProtocolError, match=r"got the str 'app-0'; pass \['app-0'\]"):
        coordinator.trigger("app-0")
    assert coordinator.pending_ids == ()
