"""The model network (``kafka_model.ModelNetwork``) under the shipped admin: each answer the
shipped-sink property test relies on, checked on its own through ``TransactionAdmin`` as
shipped, so that a model that stopped giving it would fail here and not silently weaken the
property test. Time is the model's: nothing sleeps."""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any
from unittest import mock

import kafka.errors as Errors
import pytest
from checkpoint_faults import InjectedFailure
from kafka.admin import KafkaAdminClient
from kafka.net.compat import KafkaNetClient
from kafka_model import BROKERS, KafkaModel, ModelNetwork, Step, partition_for

from checkpoint.deadline import Deadline, call_with_retries
from checkpoint.errors import DeadlineExceeded
from checkpoint.testing import ManualClock
from connectors.kafka import fence, transactions, txn_coordinators
from connectors.kafka.end_txn import EndTxnResult, EndTxnTarget
from connectors.kafka.fence import FenceResult
from connectors.kafka.txn_state import TxnState

TID = "q-0a1b2c3d-0-0"


class Cluster:
    """A model cluster, a clock, and admins on it; ``answers`` logs (request, error name)."""

    def __init__(self, *, v2: bool) -> None:
        self.clock = ManualClock(1_800_000_000.0)
        self.kafka = KafkaModel(v2=v2, clock=self.clock)
        self.answers: list[tuple[str, str]] = []

    def step(self, where: str, effect: Callable[[], Any]) -> Any:
        response = effect()
        codes = [getattr(response, "error_code", 0)] + [
            getattr(s, "error_code", 0) for s in getattr(response, "transaction_states", ())
        ]
        self.answers += [(where, Errors.for_code(c).__name__) for c in codes if c]
        return response

    def admin(self, step: Step | None = None) -> transactions.TransactionAdmin:
        def client(**config: Any) -> KafkaNetClient:
            network = ModelNetwork(self.kafka, step or self.step, **config)
            return KafkaNetClient(net=network, manager=network)

        admin = functools.partial(KafkaAdminClient, kafka_client=client)
        with (
            mock.patch.object(transactions, "KafkaNetClient", client),
            mock.patch.object(transactions, "KafkaAdminClient", admin),
        ):
            return transactions.TransactionAdmin({"bootstrap.servers": "model:9092"})

    def open(self, tid: str = TID) -> EndTxnTarget:
        pid, epoch = self.kafka.init_producer_id(tid, 60_000)
        self.kafka.produce(tid, pid, epoch, ("out", 0), (0, 0, 0))
        return EndTxnTarget(tid, pid, epoch)

    def deadline(self, seconds: float) -> Deadline:
        return Deadline(seconds, clock=self.clock)


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    """A V1 cluster, with the admin path's clocks on the model's (as the property test has)."""
    c = Cluster(v2=False)
    with contextlib.ExitStack() as stack:
        for patch in (
            mock.patch.object(Deadline.__init__, "__kwdefaults__", {"clock": c.clock}),
            mock.patch.object(
                call_with_retries,
                "__kwdefaults__",
                {**(call_with_retries.__kwdefaults__ or {}), "sleep": c.clock.advance},
            ),
            mock.patch.object(fence.fence_all, "__kwdefaults__", {"sleep": c.clock.advance}),
            mock.patch.object(txn_coordinators, "time", SimpleNamespace(monotonic=c.clock)),
        ):
            stack.enter_context(patch)
        yield c


def test_an_end_txn_meeting_prepare_commit_is_retried_until_the_markers_are_written(
    cluster: Cluster,
) -> None:
    target = cluster.open()
    cluster.kafka.delay_markers(3)
    admin = cluster.admin()
    [first] = admin.end_transactions([target], commit=True, deadline=cluster.deadline(5)).values()
    assert first.result is EndTxnResult.ENDED
    assert admin.describe([TID])[TID].state is TxnState.PREPARE_COMMIT  # type: ignore[union-attr]
    started = cluster.clock()
    [again] = admin.end_transactions([target], commit=True, deadline=cluster.deadline(5)).values()
    assert again.result is EndTxnResult.ENDED and again.attempts > 1
    assert (f"commit {TID}", "ConcurrentTransactionsError") in cluster.answers
    assert cluster.clock() - started >= 3 - 1e-9
    assert admin.describe([TID])[TID].state is TxnState.COMPLETE_COMMIT  # type: ignore[union-attr]


def test_a_fence_waits_out_prepare_abort_and_finds_the_epoch_moved(cluster: Cluster) -> None:
    target = cluster.open()
    cluster.kafka.delay_markers(2)
    [fenced] = cluster.admin().fence_transactions([target], deadline=cluster.deadline(5)).values()
    assert fenced.result is FenceResult.FENCED
    assert (f"fence {TID}", "ConcurrentTransactionsError") in cluster.answers
    assert (TID, target.producer_id, target.epoch) in cluster.kafka.aborted


def test_a_moved_coordinator_is_found_again_after_not_coordinator_and_loading(
    cluster: Cluster,
) -> None:
    target = cluster.open()
    admin = cluster.admin()
    old = admin.describe([TID])[TID].coordinator_id  # type: ignore[union-attr]
    # After the FindCoordinator and the version probe, before the EndTxn:
    cluster.kafka.move_coordinator(partition_for(TID), load_s=2, after=3)
    [ended] = admin.end_transactions([target], commit=True, deadline=cluster.deadline(5)).values()
    assert ended.result is EndTxnResult.ENDED
    assert ended.coordinator_id == cluster.kafka.coordinator(TID) != old
    errors = {error for _, error in cluster.answers}
    assert {"NotCoordinatorError", "CoordinatorLoadInProgressError"} <= errors


def test_the_listing_waits_for_a_loading_coordinator(cluster: Cluster) -> None:
    cluster.open()
    cluster.kafka.move_coordinator(partition_for(TID), load_s=2)
    assert cluster.admin().list_transactional_ids("q-") == [TID]
    assert any(
        w.startswith("list") and e == "CoordinatorLoadInProgressError" for w, e in cluster.answers
    )


def test_each_coordinator_gets_the_end_txn_version_of_its_own_transaction_version(
    cluster: Cluster,
) -> None:
    """A rolling upgrade reaches one broker at a time: the admin asks each its versions."""
    admin = cluster.admin()
    while True:
        bumps = {n: admin.epoch_bumps_on_end_at(n) for n in BROKERS}
        assert bumps == {n: cluster.kafka.brokers[n].v2 for n in BROKERS}
        if cluster.kafka.v2:
            break
        cluster.kafka.upgrade_next_broker(BROKERS[-1])
    assert all(bumps.values())
    target = cluster.open()
    admin.end_transactions([target], commit=True, deadline=cluster.deadline(5))
    assert admin.describe([TID])[TID].epoch == target.epoch + 1  # type: ignore[union-attr]


def test_a_stale_epoch_is_fenced(cluster: Cluster) -> None:
    target = cluster.open()
    cluster.kafka.init_producer_id(TID, 60_000)  # another producer takes the id
    admin = cluster.admin()
    [ended] = admin.end_transactions([target], commit=True, deadline=cluster.deadline(5)).values()
    assert ended.result is EndTxnResult.REFUSED and ended.error is Errors.ProducerFencedError


def test_a_lost_answer_times_out_on_the_model_clock(cluster: Cluster) -> None:
    target = cluster.open()

    def lose_the_commit(where: str, effect: Callable[[], Any]) -> Any:
        response = effect()
        if where.startswith("commit "):
            raise InjectedFailure(f"answer lost after {where}")
        return response

    admin = cluster.admin(lose_the_commit)
    started, wall = cluster.clock(), time.monotonic()
    [ended] = admin.end_transactions([target], commit=True, deadline=cluster.deadline(5)).values()
    assert ended.result is EndTxnResult.TIMED_OUT
    assert (TID, target.producer_id, target.epoch) in cluster.kafka.committed  # taken
    assert cluster.clock() - started >= 5 and time.monotonic() - wall < 2


def test_a_connection_broken_before_the_request_is_retried(cluster: Cluster) -> None:
    target = cluster.open()
    broken: list[str] = []

    def break_once(where: str, effect: Callable[[], Any]) -> Any:
        if where.startswith("commit ") and not broken:
            broken.append(where)
            raise InjectedFailure(f"failure before {where}")
        return effect()

    admin = cluster.admin(break_once)
    [ended] = admin.end_transactions([target], commit=True, deadline=cluster.deadline(5)).values()
    assert broken and ended.result is EndTxnResult.ENDED and ended.attempts == 2


def _fence_steps(cluster: Cluster, fail: Callable[[str, int], str | None]) -> Callable[..., Any]:
    """A step that, for the ``n``-th request named ``where``, breaks its connection
    (``"before"``), loses its answer (``"after"``) or answers it (``None``)."""
    seen: dict[str, int] = {}

    def step(where: str, effect: Callable[[], Any]) -> Any:
        seen[where] = seen.get(where, 0) + 1
        how = fail(where, seen[where])
        if how == "before":
            raise InjectedFailure(f"failure before {where}")
        response = cluster.step(where, effect)
        cluster.answers.append((where, "sent"))
        if how == "after":
            raise InjectedFailure(f"answer lost after {where}")
        return response

    return step


def test_a_fence_whose_lookup_answer_was_lost_looks_up_again_and_fences_once(
    cluster: Cluster,
) -> None:
    """Change 85ac3ca on the model: the describe goes through, the fence's FindCoordinator
    answer is lost (RequestTimedOutError after the 30 s request timeout), the lookup is
    retried and the InitProducerId is sent exactly once, within the deadline."""
    target = cluster.open()
    finds = {"n": 0}

    def fail(where: str, n: int) -> str | None:
        if where == "find coordinator":
            finds["n"] += 1
            return "after" if finds["n"] == 2 else None  # the describe's lookup is the first
        return None

    admin = cluster.admin(_fence_steps(cluster, fail))
    started = cluster.clock()
    [fenced] = admin.fence_transactions([target], deadline=cluster.deadline(60)).values()
    assert fenced.result is FenceResult.FENCED
    assert [w for w, e in cluster.answers if e == "sent"].count(f"fence {TID}") == 1
    assert 30 <= cluster.clock() - started < 60


def test_a_fence_whose_coordinator_stays_unreachable_fails_loudly_within_its_deadline(
    cluster: Cluster,
) -> None:
    """Every lookup after the first describe breaks, for good: the fence describes again after
    its backoff, whose lookups are retried with backoff (a bounded number of times, not a busy
    loop) until the deadline; no InitProducerId goes out, and the error names the failure."""
    target = cluster.open()
    finds = {"n": 0}

    def fail(where: str, n: int) -> str | None:
        if where == "find coordinator":
            finds["n"] += 1
            return "before" if finds["n"] >= 2 else None
        return None

    admin = cluster.admin(_fence_steps(cluster, fail))
    started = cluster.clock()
    with pytest.raises(DeadlineExceeded) as caught:
        admin.fence_transactions([target], deadline=cluster.deadline(5))
    message = str(caught.value)
    assert f"DescribeTransactions of {TID} did not finish within 5 s" in message
    assert "KafkaConnectionError" in message and "broken pipe" in message
    assert not any(w == f"fence {TID}" for w, _ in cluster.answers)
    assert 5 <= cluster.clock() - started < 5.5
    assert 2 < finds["n"] < 12


def test_a_fence_whose_lookup_broke_describes_again_before_it_sends(cluster: Cluster) -> None:
    """A fence's InitProducerId aborts whatever transaction the id holds (no epoch check on an
    Ongoing one), so it goes out only right after a describe that shows the target's epoch
    current. Here the fence's lookup breaks, and meanwhile a new producer takes the id (which
    aborts the target's transaction) and begins its own: the fence must describe again and
    find the target fenced, not look up again and abort the newer transaction. (Before: the
    retried lookup's InitProducerId, at the target's epoch, aborted it.)"""
    target = cluster.open()
    finds = {"n": 0}
    newer: list[tuple[int, int]] = []

    def fail(where: str, n: int) -> str | None:
        if where == "find coordinator":
            finds["n"] += 1
            if finds["n"] == 2:  # the fence's own lookup, after the describe's
                pid, epoch = cluster.kafka.init_producer_id(TID, 60_000)
                cluster.kafka.produce(TID, pid, epoch, ("out", 0), (1, 1, 1))
                newer.append((pid, epoch))
                return "before"
        return None

    admin = cluster.admin(_fence_steps(cluster, fail))
    [fenced] = admin.fence_transactions([target], deadline=cluster.deadline(60)).values()
    assert fenced.result is FenceResult.FENCED
    [(pid, epoch)] = newer
    assert (TID, target.producer_id, target.epoch) in cluster.kafka.aborted
    assert (TID, pid, epoch) not in cluster.kafka.aborted
    assert admin.describe([TID])[TID].state is TxnState.ONGOING  # type: ignore[union-attr]
    assert not any(w == f"fence {TID}" for w, _ in cluster.answers)


def test_a_fence_whose_coordinator_moved_describes_again_before_it_sends_again(
    cluster: Cluster,
) -> None:
    """As above, with the InitProducerId itself answered NOT_COORDINATOR (then
    COORDINATOR_LOAD_IN_PROGRESS): not taken, but time passes before it can be sent again, and
    a new producer took the id and began a transaction meanwhile. The fence describes again
    and finds the target fenced. (Before: sent again after a new lookup, it aborted the newer
    transaction.)"""
    target = cluster.open()
    newer: list[tuple[int, int]] = []

    def step(where: str, effect: Callable[[], Any]) -> Any:
        if where == f"fence {TID}" and not newer:
            pid, epoch = cluster.kafka.init_producer_id(TID, 60_000)
            cluster.kafka.produce(TID, pid, epoch, ("out", 0), (1, 1, 1))
            newer.append((pid, epoch))
            cluster.kafka.move_coordinator(partition_for(TID), load_s=0.5)
        return cluster.step(where, effect)

    admin = cluster.admin(step)
    [fenced] = admin.fence_transactions([target], deadline=cluster.deadline(60)).values()
    assert fenced.result is FenceResult.FENCED
    [(pid, epoch)] = newer
    assert (TID, pid, epoch) not in cluster.kafka.aborted
    assert [w for w, _ in cluster.answers if w == f"fence {TID}"] == [f"fence {TID}"]


def test_a_v2_coordinator_skips_an_offline_partitions_marker_which_the_sink_can_write() -> None:
    """KAFKA-20734 as modelled: a V2 commit while partition 0's leader is offline completes
    without its marker; the range stays open (owed), its records counted as committed. The
    sink's COMMIT marker at E + 1 closes it; once a later transaction of the producer wrote
    there at E + 1, the same guarded marker is refused (INVALID_PRODUCER_EPOCH)."""
    c = Cluster(v2=True)
    target = c.open()
    c.kafka.take_offline(("out", 0), 30)
    assert c.kafka.end_txn(TID, target.producer_id, target.epoch, True, v2=True) is Errors.NoError
    key = (TID, target.producer_id, target.epoch)
    assert c.kafka.describe(TID).state is TxnState.COMPLETE_COMMIT  # type: ignore[union-attr]
    assert c.kafka.skipped == 1 and c.kafka.owed() == [key]
    assert c.kafka.visible == [(0, 0, 0)]  # committed, its marker owed
    admin = c.admin()
    tp = transactions.TopicPartition("out", 0)
    admin.write_commit_marker(tp, target.producer_id, target.epoch + 1, 0)
    assert c.kafka.owed() == [] and c.kafka.visible == [(0, 0, 0)]
    c.kafka.produce(TID, target.producer_id, target.epoch + 1, ("out", 0), (1, 0, 0))  # next
    with pytest.raises(Errors.InvalidProducerEpochError):
        admin.write_commit_marker(tp, target.producer_id, target.epoch + 1, 0)
    assert c.kafka.visible == [(0, 0, 0)]  # the later transaction's record stays uncommitted


def test_a_v1_coordinator_waits_for_an_offline_partition() -> None:
    c = Cluster(v2=False)
    target = c.open()
    c.kafka.take_offline(("out", 0), 30)
    c.kafka.end_txn(TID, target.producer_id, target.epoch, True, v2=False)
    assert c.kafka.describe(TID).state is TxnState.PREPARE_COMMIT  # type: ignore[union-attr]
    c.clock.advance(30)
    assert c.kafka.describe(TID).state is TxnState.COMPLETE_COMMIT  # type: ignore[union-attr]
    assert c.kafka.skipped == 0 and c.kafka.owed() == []
