"""A Kafka 4.x broker bug that the chaos harness found: a COMMIT marker skipped for a partition
whose leader is offline (KAFKA-20734, open as of 2026-11-28).

The transaction coordinator looks up each partition's leader before it writes the markers. Since
the metadata cache was rewritten for 4.x, a partition whose leader is offline is answered as if
it did not exist, and the coordinator skips it as "likely deleted" and completes the commit.
When the leader returns, the partition still holds the transaction open: it hangs, and every
``read_committed`` reader of the partition stops at it. Nothing is lost (the records are in the
log, and the coordinator committed them), but nothing after them is readable until a COMMIT
marker is written there; an abort marker (``kafka-transactions.sh abort``) would lose them.
3.x waits in PrepareCommit until the leader is back, then writes the marker.

The case is made deterministic with partitions of one replica: their leader is killed between
the transaction's records and its commit. In the chaos harness it took a leader of three
replicas killed as its batch's EndTxns went out, before the next leader was elected.

The commit goes through the sink's own steps 4 and 5 (``TwoPhaseCommit.notify_complete`` over a
decision store), so the repair is the one the sink makes when it builds the next batch's writer
(:func:`connectors.kafka.sink.commit_path.settle_newest_decision`). The operator's command
(``txn find-hanging --commit``) repairs another partition of the same transaction.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import errors as Errors
from kafka.structs import TopicPartition

from checkpoint.model import Committable, Snapshot
from checkpoint.store import SnapshotStore
from checkpoint.two_phase_commit import TwoPhaseCommit
from connectors.kafka.partition_txns import open_on_partitions
from connectors.kafka.sink.commit_path import settle_newest_decision
from connectors.kafka.sink.committer import KafkaCommitter
from connectors.kafka.sink.errors import CommitMarkerSkippedError
from connectors.kafka.sink.naming import TransactionalIdNaming
from connectors.kafka.sink.owed_markers import Reason
from connectors.kafka.transactions import TransactionAdmin
from connectors.kafka.txn_state import TxnDescription, TxnState
from integration_tests.kafka_fixtures import running_cluster
from integration_tests.sink.harness import kill_broker
from integration_tests.sink.transactions import describe, stable_and_end, values
from kafka_eos.cluster import ProcessCluster
from kafka_eos.commands.txn import command as txn_command
from kafka_eos.operations.hanging import abort_hanging, find_hanging

pytestmark = [pytest.mark.kafka]

# The releases whose coordinator skips the marker; a release that fixes it fails the test below,
# which then tells docs/reliability.md and docs/cli.md to change.
SKIPS_THE_MARKER = {"4.3.1": True, "3.9.2": False}
TASKS = 2
WRITTEN = Counter(f"{task}-{n}" for task in range(TASKS) for n in range(10))  # on each partition


@pytest.fixture(scope="module", params=sorted(SKIPS_THE_MARKER), ids=lambda v: f"kafka-{v}")
def brokers(request: pytest.FixtureRequest) -> Iterator[ProcessCluster]:
    with running_cluster("process", request.param, nodes=3) as cluster:
        assert isinstance(cluster, ProcessCluster)
        yield cluster


def _leader_answers(bootstrap: str, tps: list[TopicPartition]) -> bool:
    """Whether a fresh admin reaches the partitions' leader: right after a restart a broker's
    metadata may name the leader but not list it yet (kafka-python: UnknownBrokerIdError), or
    list it before it accepts connections."""
    try:
        with TransactionAdmin({"bootstrap.servers": bootstrap}) as txn_admin:
            open_on_partitions(txn_admin.kafka_admin, tps)
        return True
    except (Errors.UnknownBrokerIdError, Errors.NodeNotReadyError, Errors.KafkaConnectionError):
        return False


@dataclass(frozen=True)
class SkippedCommit:
    """A kafka-eos sink's batch of two tasks' transactions, each over two topics' partitions
    led by one broker, decided and committed while that broker was down, then the broker
    back."""

    prefix: str
    partitions: list[TopicPartition]
    committables: list[Committable]  # one a task, each over both partitions
    protocol: TwoPhaseCommit
    committer: KafkaCommitter


@pytest.fixture
def skipped(brokers: ProcessCluster, tmp_path: Path) -> Iterator[SkippedCommit]:
    bootstrap = brokers.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [f"t-{uuid.uuid4().hex[:12]}" for _ in range(2)]
    created = admin.create_topics(
        [NewTopic(t, num_partitions=3, replication_factor=1) for t in topics]
    )
    for future in created.values():
        future.result(30)
    prefix = f"p-{uuid.uuid4().hex[:8]}"
    naming = TransactionalIdNaming(prefix, "0123abcd")
    tids = [naming.transactional_id(task, 0) for task in range(TASKS)]  # a kafka-eos sink's
    producers = [Producer({"bootstrap.servers": bootstrap, "transactional.id": t}) for t in tids]
    for producer in producers:
        producer.init_transactions(30)
    with TransactionAdmin({"bootstrap.servers": bootstrap}) as txn_admin:
        coordinators = {describe(txn_admin, t).coordinator_id for t in tids}
    # A partition of each topic, both led by one broker that coordinates neither transaction.
    leaders = {t: admin.list_topics(t, timeout=10).topics[t].partitions for t in topics}
    leader = next(m.leader for m in leaders[topics[0]].values() if m.leader not in coordinators)
    partitions = [
        TopicPartition(t, next(p for p, m in sorted(leaders[t].items()) if m.leader == leader))
        for t in topics
    ]
    committables = []
    for task, producer in enumerate(producers):  # both tasks write to both partitions
        producer.begin_transaction()
        for tp in partitions:
            for n in range(10):
                producer.produce(tp.topic, value=f"{task}-{n}".encode(), partition=tp.partition)
        assert producer.flush(30) == 0
        with TransactionAdmin({"bootstrap.servers": bootstrap}) as txn_admin:
            now = describe(txn_admin, tids[task])
        committables.append(
            Committable(
                tids[task], now.producer_id, now.epoch, 20, tuple(now.partitions),
                now.start_time_ms,
            )
        )  # fmt: skip
    kill_broker(brokers, leader, restart=False)
    deadline = time.monotonic() + 60
    while any(
        admin.list_topics(tp.topic, timeout=10).topics[tp.topic].partitions[tp.partition].leader
        >= 0
        for tp in partitions
    ):
        assert time.monotonic() < deadline, "the partitions' leader never went offline"
        time.sleep(0.5)
    # The sink's decision, then its steps 4 and 5: EndTxn v5 where the coordinator speaks
    # transactions V2, and the confirmation.
    committer = KafkaCommitter({"bootstrap.servers": bootstrap}, naming, 60.0)
    protocol = TwoPhaseCommit(SnapshotStore(tmp_path / "decisions"), committer, pipeline_id=prefix)
    decision = Snapshot(1, prefix, tuple(committables))
    protocol.store.write(decision)
    protocol.notify_complete(decision)
    assert protocol.store.is_confirmed(1)
    brokers.start_node(leader)
    back = time.monotonic() + 60
    while not _leader_answers(bootstrap, partitions):
        assert time.monotonic() < back, "the restarted leader never answered"
        time.sleep(1)
    with TransactionAdmin({"bootstrap.servers": bootstrap}) as txn_admin:
        for tid in tids:
            _completed(txn_admin, tid)
    try:
        yield SkippedCommit(prefix, partitions, committables, protocol, committer)
    finally:
        committer.close()


def test_a_commit_while_a_partitions_leader_is_offline(
    brokers: ProcessCluster, skipped: SkippedCommit
) -> None:
    bootstrap = brokers.bootstrap_servers
    operators, sinks = skipped.partitions
    with TransactionAdmin({"bootstrap.servers": bootstrap}) as txn_admin:
        open_now = open_on_partitions(txn_admin.kafka_admin, skipped.partitions)
        if not SKIPS_THE_MARKER[brokers.version]:
            assert open_now == [], "the COMMIT markers were written once the leader came back"
            assert settle_newest_decision(skipped.protocol, skipped.committer) == []
            return
        assert sorted((o.topic, o.partition, o.producer_id) for o in open_now) == sorted(
            (tp.topic, tp.partition, c.producer_id)
            for tp in skipped.partitions
            for c in skipped.committables
        ), "the coordinators committed, but the markers never reached the partitions (KAFKA-20734)"
        hanging = find_hanging(
            txn_admin, [operators], older_than_ms=0, now_ms=int(time.time() * 1000)
        )
        assert len(hanging) == TASKS
        refused = abort_hanging(txn_admin, hanging[0])
    assert refused is not None and "its COMMIT marker never reached this partition" in refused
    assert values(bootstrap, operators.topic, "read_committed") == Counter()

    # The operator's repair of one partition: the COMMIT markers the coordinators decided.
    cluster = ["--bootstrap-servers", bootstrap, "--topic", operators.topic, "--older-than", "0s"]
    repaired = CliRunner().invoke(
        txn_command,
        ["find-hanging", *cluster, "--prefix", skipped.prefix, "--commit", "--abort", "--yes",
         "--json"],
    )  # fmt: skip
    assert repaired.exit_code == 0, repaired.output
    entries = json.loads(repaired.stdout)["hanging"]
    assert [(e["committed"], e["aborted"], e["error"]) for e in entries] == [(True, None, None)] * 2

    # The sink's own repair of the other, both tasks' transactions, when it builds the next
    # batch's writer.
    assert settle_newest_decision(skipped.protocol, skipped.committer) == [sinks]
    for tp in skipped.partitions:
        assert values(bootstrap, tp.topic, "read_committed") == WRITTEN
        assert stable_and_end(bootstrap, tp.topic, tp.partition) == (22, 22), "records, markers"

    # A later transaction of a producer, open on the repaired partition, is none of the
    # decision's: the look ends at once, with nothing to write.
    later = _later_transaction(bootstrap, skipped.committables[0], sinks)
    started = time.monotonic()
    assert skipped.committer.settle_markers(1, skipped.committables) == []
    assert time.monotonic() - started < 10, "the look waited on a transaction of no decision"
    later.abort_transaction(30)


@pytest.mark.parametrize(
    "brokers", [v for v, skips in SKIPS_THE_MARKER.items() if skips], indirect=True,
    ids=lambda v: f"kafka-{v}",
)  # fmt: skip
def test_a_later_transaction_in_the_open_range_stops_the_repair(
    brokers: ProcessCluster, skipped: SkippedCommit
) -> None:
    """A later transaction of the producer wrote into the committed records' open range (what a
    task of the next batch that took the same id would do, had the sink not looked first): a
    COMMIT marker would now commit its records too, and its abort would drop the committed ones.
    The sink writes no marker and stops, naming the partition and where the range begins."""
    bootstrap = brokers.bootstrap_servers
    c = skipped.committables[0]
    tp = skipped.partitions[1]
    later = _later_transaction(bootstrap, c, tp)
    with pytest.raises(CommitMarkerSkippedError) as stopped:
        settle_newest_decision(skipped.protocol, skipped.committer)
    error = stopped.value
    assert (error.reason, error.transactional_id, error.partition, error.start_offset) == (
        Reason.JOINED,
        c.transactional_id,
        (tp.topic, tp.partition),
        0,
    ), error
    assert not error.waits and f"No marker was written to {tp.topic}-{tp.partition}" in str(error)
    assert stable_and_end(bootstrap, tp.topic, tp.partition)[0] == 0, "its range still open"
    later.abort_transaction(30)


def _later_transaction(bootstrap: str, c: Committable, tp: TopicPartition) -> Producer:
    """The next transaction of ``c``'s id, open with a record on ``tp``: what a task of the next
    batch that took the same id would leave."""
    later = Producer({"bootstrap.servers": bootstrap, "transactional.id": c.transactional_id})
    later.init_transactions(30)
    later.begin_transaction()
    later.produce(tp.topic, value=b"later", partition=tp.partition)
    assert later.flush(30) == 0
    return later


def _completed(admin: TransactionAdmin, tid: str) -> TxnDescription:
    """The id once its commit completed; the brokers may still be settling after the restart
    (a describe can meet a broker that its client does not know yet)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            now = admin.describe([tid])[tid]
        except Errors.KafkaError as exc:
            now, error = None, exc
        else:
            error = None
        if now is not None and now.state is TxnState.COMPLETE_COMMIT:
            return now
        assert time.monotonic() < deadline, f"the commit never completed: {now or error}"
        time.sleep(0.5)
