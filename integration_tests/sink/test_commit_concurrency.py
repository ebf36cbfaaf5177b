"""A batch's commits go to all coordinators at once, under one deadline, on real brokers.

The driver ends every transaction of a decided batch with one ``end_transactions`` call. A
coordinator that is dead must not hold back the others: its transactions are retried while
the role moves to a surviving broker, and they come back committed or timed out, never as a
success that did not happen. Every check ends with a read_committed drain holding each record
exactly once.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass

import pytest
from confluent_kafka import Producer

from checkpoint.deadline import Deadline
from connectors.kafka.end_txn import EndTxnResult, EndTxnTarget
from connectors.kafka.transactions import TransactionAdmin
from connectors.kafka.txn_coordinators import COORDINATOR_MOVED_ERRORS
from connectors.kafka.txn_state import TxnState
from integration_tests.conftest import KafkaFactory, create_topic, write_transaction
from integration_tests.sink.transactions import values
from kafka_eos.cluster import KafkaCluster

pytestmark = pytest.mark.kafka

# What a deadline may be overshot by on a loaded machine: the loop polls in slices of what is
# left, so only scheduling delays add to it.
OVERSHOOT_S = 5.0
# KRaft fences a dead broker after broker.session.timeout.ms (9 s), then the transaction log's
# partitions it led get new leaders, which load them: the role moves within this, with room.
ROLE_MOVES_WITHIN_S = 45.0


@dataclass(frozen=True)
class Opened:
    """An open transaction, named as EndTxn names it; its producer keeps it open."""

    target: EndTxnTarget
    coordinator_id: int
    values: tuple[str, ...]
    producer: Producer


def listed(admin: TransactionAdmin) -> set[str]:
    return set(admin.list_transactional_ids("tx-", ongoing_only=False))


def open_transaction(
    admin: TransactionAdmin, bootstrap: str, topic: str, index: int, seen: set[str]
) -> Opened:
    """One transaction of five records on ``topic``, left open; ``seen`` holds the ids listed
    before, so the new one is the id that appeared."""
    records = tuple(f"txn{index}-record{n}" for n in range(5))
    producer = write_transaction(bootstrap, topic, list(records), commit=None)
    (tid,) = listed(admin) - seen
    seen.add(tid)
    now = admin.describe([tid])[tid]
    assert now is not None and now.state == TxnState.ONGOING, now
    assert {t for t, _ in now.partitions} == {topic}, now
    return Opened(
        EndTxnTarget(tid, now.producer_id, now.epoch), now.coordinator_id, records, producer
    )


def wait_until_committed(admin: TransactionAdmin, opened: list[Opened], timeout_s: float) -> None:
    """Until every transaction is CompleteCommit as the one opened (its markers are written, so
    read_committed sees it); an abort fails at once."""
    give_up = time.monotonic() + timeout_s
    pending = {o.target.transactional_id: o.target for o in opened}
    while pending:
        for tid, now in admin.describe(pending).items():
            assert now is not None and now.state not in (
                TxnState.PREPARE_ABORT,
                TxnState.COMPLETE_ABORT,
            ), f"{tid} was not committed: {now}"
            if now.state == TxnState.COMPLETE_COMMIT:
                target = pending.pop(tid)
                bumps = admin.epoch_bumps_on_end_at(now.coordinator_id)
                assert now.is_commit_of(target.producer_id, target.epoch, bump_possible=bumps), now
        assert time.monotonic() < give_up, f"still not CompleteCommit: {sorted(pending)}"
        if pending:
            time.sleep(0.2)


def records_of(opened: list[Opened]) -> Counter[str]:
    return Counter(record for o in opened for record in o.values)


def test_one_call_commits_eight_transactions_each_record_once(
    versioned_kafka: KafkaCluster,
) -> None:
    bootstrap = versioned_kafka.bootstrap_servers
    topic = create_topic(bootstrap, partitions=2)
    with TransactionAdmin({"bootstrap.servers": bootstrap}) as admin:
        seen = listed(admin)
        opened = [open_transaction(admin, bootstrap, topic, i, seen) for i in range(8)]
        assert values(bootstrap, topic, "read_committed") == Counter()  # all open, none visible

        outcomes = admin.end_transactions(
            [o.target for o in opened], commit=True, deadline=Deadline(60)
        )

        assert {tid: o.result for tid, o in outcomes.items()} == {
            o.target.transactional_id: EndTxnResult.ENDED for o in opened
        }, [str(o) for o in outcomes.values()]
        wait_until_committed(admin, opened, timeout_s=60)
    assert values(bootstrap, topic, "read_committed") == records_of(opened)


def test_a_dead_coordinator_holds_back_none_of_the_other_commits(
    kafka_factory: KafkaFactory,
) -> None:
    """Three brokers; transactions on at least two coordinators; the coordinator of some is
    killed -9 for good. First a short deadline: its transactions come back timed out within it
    (no 30 s kafka-python timeout runs outside it). Then one call for the whole batch: the
    transactions of live coordinators are committed, the dead one's once the role has moved,
    or reported timed out; and the call returns within its deadline."""
    cluster = kafka_factory(mode="process", nodes=3)
    bootstrap = cluster.bootstrap_servers
    topic = create_topic(bootstrap, partitions=3, replication=3)
    with TransactionAdmin({"bootstrap.servers": bootstrap}) as admin:
        seen = listed(admin)
        opened: list[Opened] = []
        per_coordinator: Counter[int] = Counter()
        while sum(1 for n in per_coordinator.values() if n >= 2) < 2:
            assert len(opened) < 12, f"transactions not spread over coordinators: {per_coordinator}"
            opened.append(open_transaction(admin, bootstrap, topic, len(opened), seen))
            per_coordinator[opened[-1].coordinator_id] += 1
        victim, _ = per_coordinator.most_common(1)[0]
        dead = [o for o in opened if o.coordinator_id == victim]
        live = [o for o in opened if o.coordinator_id != victim]

        cluster.stop_node(victim, hard=True)

        started = time.monotonic()
        early = admin.end_transactions([o.target for o in dead], commit=True, deadline=Deadline(3))
        assert time.monotonic() - started < 3 + OVERSHOOT_S
        for outcome in early.values():
            # The role cannot have moved yet (the broker is fenced after 9 s): every attempt
            # met the dead broker, and none is reported as a commit.
            assert outcome.result is EndTxnResult.TIMED_OUT, str(outcome)
            assert outcome.error is not None and issubclass(
                outcome.error, COORDINATOR_MOVED_ERRORS
            ), str(outcome)

        started = time.monotonic()
        outcomes = admin.end_transactions(
            [o.target for o in opened], commit=True, deadline=Deadline(ROLE_MOVES_WITHIN_S)
        )
        assert time.monotonic() - started < ROLE_MOVES_WITHIN_S + OVERSHOOT_S
        for o in live:
            outcome = outcomes[o.target.transactional_id]
            assert outcome.result is EndTxnResult.ENDED, str(outcome)
            assert outcome.coordinator_id == o.coordinator_id, str(outcome)
        late = []
        for o in dead:
            outcome = outcomes[o.target.transactional_id]
            if outcome.result is EndTxnResult.ENDED:
                assert outcome.coordinator_id != victim, str(outcome)  # where the role moved
            else:
                assert outcome.result is EndTxnResult.TIMED_OUT, str(outcome)
                late.append(o)
        # What the deadline cut short, the driver's recovery re-drives; only those are re-sent,
        # so an ENDED that had not happened would leave its transaction open and fail below.
        if late:
            retried = admin.end_transactions(
                [o.target for o in late], commit=True, deadline=Deadline(60)
            )
            assert {o.result for o in retried.values()} == {EndTxnResult.ENDED}, [
                str(o) for o in retried.values()
            ]
        wait_until_committed(admin, opened, timeout_s=60)
    survivors = ",".join(
        address
        for node_id, address in zip(cluster.node_ids, bootstrap.split(","), strict=True)
        if node_id != victim
    )
    assert values(survivors, topic, "read_committed") == records_of(opened)
