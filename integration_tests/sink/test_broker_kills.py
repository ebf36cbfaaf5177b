"""Brokers killed -9 at the sink's worst moments: the only broker between pre-commit and
commit; on three brokers (replication factor 3, ``min.insync.replicas`` 2), the leader of an
output partition while a task's transaction is open, the coordinator after the decision, and
the coordinator while a commit's markers are still unwritten.

Each kill asserts its effect (a node gone, a new pid, a moved coordinator or leader), so that
with the kill removed (``make test-faults-removed``) the test fails on its own assertion. Each
case ends with every number exactly once for read_committed readers, and, where only the
broker failed, exactly once even for read_uncommitted ones (the producer's retries after a
leader change are idempotent).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from checkpoint.deadline import Deadline
from connectors.kafka.transactions import TransactionAdmin
from connectors.kafka.txn_state import TxnState
from integration_tests.conftest import KafkaFactory, create_topic
from integration_tests.kafka_fixtures import running_cluster, selected_version
from integration_tests.sink.harness import ALL, Pipeline, assert_exactly_once, kill_broker
from integration_tests.sink.transactions import wait_until_state
from kafka_eos.cluster import ProcessCluster

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


@pytest.fixture(scope="module")
def three_brokers() -> Iterator[ProcessCluster]:
    """One three-node cluster for the file's tests: each starts what it killed again."""
    with running_cluster("process", selected_version(), nodes=3) as cluster:
        assert isinstance(cluster, ProcessCluster)
        yield cluster


@pytest.fixture
def brokers(three_brokers: ProcessCluster) -> Iterator[ProcessCluster]:
    yield three_brokers
    for node_id in three_brokers.node_ids:
        three_brokers.start_node(node_id)  # a no-op for a running node


def leaders_and_isrs(bootstrap: str, topic: str) -> dict[int, tuple[int, tuple[int, ...]]]:
    """Each partition's leader and in-sync replicas, as the metadata shows them."""
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=30)
    return {
        p.id: (p.leader, tuple(sorted(p.isrs))) for p in metadata.topics[topic].partitions.values()
    }


def survivors(cluster: ProcessCluster, dead: int) -> str:
    """The bootstrap list without the node ``dead``: a client must not wait on it."""
    return ",".join(
        address
        for node_id, address in zip(
            cluster.node_ids, cluster.bootstrap_servers.split(","), strict=True
        )
        if node_id != dead
    )


def test_broker_crash_between_pre_commit_and_commit(
    kafka_factory: KafkaFactory, tmp_path: Path
) -> None:
    """The only broker is killed -9 while the driver holds batch 1's pre-committed
    transactions, and comes back: the transactions survive in its transaction log and the
    batch commits once."""
    cluster = kafka_factory(mode="process")
    assert isinstance(cluster, ProcessCluster)
    bootstrap = cluster.bootstrap_servers
    pipeline = Pipeline(bootstrap, create_topic(bootstrap, partitions=2), tmp_path / "cp")
    go = tmp_path / "go"
    crash_at = f"driver.before_decision@1:stall-until={go}"
    with pipeline.started(crash_at) as job:
        pipeline.wait_until_struck(job, crash_at)
        # The window: every task of batch 1 pre-committed, nothing decided yet.
        assert pipeline.store().checkpoint_ids() == [0]
        tids = pipeline.open_transactions()
        assert len(tids) == 2, tids
        assert pipeline.transaction_states(tids) == dict.fromkeys(tids, TxnState.ONGOING)
        [node] = cluster.node_ids
        [broker_pid] = cluster.pids()
        kill_broker(cluster, node, restart=True)
        assert cluster.pids() != [broker_pid], "the broker was not killed and restarted"
        go.touch()
        _, stderr = job.communicate(timeout=300)
    assert job.returncode == 0, stderr[-4000:]
    assert_exactly_once(pipeline)
    assert pipeline.uncommitted() == ALL


def test_a_partition_leader_killed_while_a_tasks_transaction_is_open(
    brokers: ProcessCluster, tmp_path: Path
) -> None:
    """Batch 1's only task has produced its records into its transaction and is about to
    flush and pre-commit when the leader of one of its output partitions is killed -9, for
    good. The producer finds the new leader, the flush and pre-commit succeed, and the
    markers of the commit go to the new leader: the batch is visible once, and nothing was
    written twice."""
    bootstrap = brokers.bootstrap_servers
    # Three partitions of three replicas: each broker leads one.
    topic = create_topic(bootstrap, partitions=3, replication=3)
    pipeline = Pipeline(bootstrap, topic, tmp_path / "cp", partitions=1)
    go = tmp_path / "go"
    crash_at = f"task.before_pre_commit@1:stall-until={go}"
    with pipeline.started(crash_at) as job:
        pipeline.wait_until_struck(job, crash_at)
        # The window: batch 0 committed, batch 1's transaction open with its records written.
        assert pipeline.store().checkpoint_ids() == [0]
        # The records may still wait in the producer's queue (its linger, on a loaded machine):
        # the transaction opens, and each partition joins it, as they reach the brokers. Under V2
        # a partition joins once its leader has verified the first records.
        deadline = Deadline(30)
        while not (opened := pipeline.open_transactions()):
            assert not deadline.expired(), "batch 1's transaction never opened"
            time.sleep(0.2)
        [tid] = opened
        while (described := pipeline.transactions([tid])[tid]) is None or len(
            described.partitions
        ) < 3:
            assert not deadline.expired(), f"not all 3 partitions in the transaction: {described}"
            time.sleep(0.2)
        assert described.state is TxnState.ONGOING, described
        # A partition of the transaction led by a broker that does not coordinate it: this
        # kill tests the partition's failover, the coordinator's is tested below.
        victim, partition = next(
            (leader, p)
            for p, (leader, _) in sorted(leaders_and_isrs(bootstrap, topic).items())
            if leader != described.coordinator_id and (topic, p) in described.partitions
        )
        kill_broker(brokers, victim, restart=False)
        assert victim not in brokers.running_node_ids, "the leader was not killed"
        go.touch()
        _, stderr = job.communicate(timeout=300)
    assert job.returncode == 0, stderr[-4000:]
    pipeline.bootstrap = survivors(brokers, victim)
    leader, _ = leaders_and_isrs(pipeline.bootstrap, topic)[partition]
    assert leader not in (victim, -1), f"partition {partition} still led by {leader}"
    assert_exactly_once(pipeline)
    assert pipeline.uncommitted() == ALL  # the retried produce wrote nothing twice


def test_transaction_coordinator_killed_after_the_decision(
    brokers: ProcessCluster, tmp_path: Path
) -> None:
    """Batch 1 is decided and the driver is about to send its EndTxns when the broker
    coordinating the batch's first transaction is killed -9, for good. The coordinator
    role moves to a surviving replica of the transaction log, and the driver must find it
    there and commit: a decided batch is never lost to a broker crash."""
    bootstrap = brokers.bootstrap_servers
    topic = create_topic(bootstrap, partitions=2, replication=3)
    pipeline = Pipeline(bootstrap, topic, tmp_path / "cp")
    go = tmp_path / "go"
    crash_at = f"driver.before_end_txn@1#1:stall-until={go}"
    with pipeline.started(crash_at) as job:
        pipeline.wait_until_struck(job, crash_at)
        # The window: batch 1 decided, its transactions still open.
        assert pipeline.store().checkpoint_ids() == [0, 1]
        tids = pipeline.decided_transactional_ids(1)
        assert pipeline.transaction_states(tids) == dict.fromkeys(tids, TxnState.ONGOING)
        first = tids[0]
        described = pipeline.transactions([first])[first]
        assert described is not None
        kill_broker(brokers, described.coordinator_id, restart=False)
        assert described.coordinator_id not in brokers.running_node_ids, "it was not killed"
        go.touch()
        _, stderr = job.communicate(timeout=300)
    assert job.returncode == 0, stderr[-4000:]
    pipeline.bootstrap = survivors(brokers, described.coordinator_id)
    now = pipeline.transactions([first])[first]
    assert now is not None and now.coordinator_id != described.coordinator_id  # it moved
    assert_exactly_once(pipeline)
    assert pipeline.uncommitted() == ALL


def test_the_coordinator_killed_while_a_commits_markers_are_unwritten(
    brokers: ProcessCluster, tmp_path: Path
) -> None:
    """The driver's EndTxn of batch 1 is answered once the coordinator has logged
    PrepareCommit; the markers follow. Here they cannot be written yet: the output topic needs
    all three replicas in sync (``min.insync.replicas`` 3), and a third broker is down. While
    the transaction is PrepareCommit, its coordinator is killed -9 and restarted, then the
    third broker comes back. The coordinator that loads the transaction log must finish the
    commit: batch 1 is visible once, and a later batch is not held back for good."""
    bootstrap = brokers.bootstrap_servers
    topic = create_topic(
        bootstrap, partitions=2, replication=3, config={"min.insync.replicas": "3"}
    )
    pipeline = Pipeline(bootstrap, topic, tmp_path / "cp", partitions=1)
    go = tmp_path / "go"
    crash_at = f"driver.before_end_txn@1#1:stall-until={go}"
    with pipeline.started(crash_at) as job:
        pipeline.wait_until_struck(job, crash_at)
        # The window: batch 1 decided, its one transaction open, no EndTxn sent.
        assert pipeline.store().checkpoint_ids() == [0, 1]
        [tid] = pipeline.decided_transactional_ids(1)
        described = pipeline.transactions([tid])[tid]
        assert described is not None and described.state is TxnState.ONGOING, described
        coordinator = described.coordinator_id
        holder = min(n for n in brokers.node_ids if n != coordinator)
        kill_broker(brokers, holder, restart=False)
        reachable = survivors(brokers, holder)
        # Out of sync (fenced by the controller): no marker can reach min.insync.replicas.
        deadline = Deadline(60)
        while any(holder in isr for _, isr in leaders_and_isrs(reachable, topic).values()):
            assert not deadline.expired(), f"broker {holder} still in sync after 60 s"
            time.sleep(0.2)
        go.touch()
        with TransactionAdmin({"bootstrap.servers": reachable}) as admin:
            pending = wait_until_state(admin, tid, TxnState.PREPARE_COMMIT)
            assert pending.coordinator_id == coordinator, pending
            time.sleep(2)  # the markers stay unwritten while the broker is down
            assert wait_until_state(admin, tid, TxnState.PREPARE_COMMIT) == pending
        before = set(brokers.pids())
        kill_broker(brokers, coordinator, restart=True)
        after = set(brokers.pids())
        assert len(before - after) == 1 == len(after - before), "no broker killed and restarted"
        brokers.start_node(holder)
        _, stderr = job.communicate(timeout=300)
    assert job.returncode == 0, stderr[-4000:]
    with TransactionAdmin({"bootstrap.servers": bootstrap}) as admin:
        wait_until_state(admin, tid, TxnState.COMPLETE_COMMIT)
    assert_exactly_once(pipeline)
    assert pipeline.uncommitted() == ALL
