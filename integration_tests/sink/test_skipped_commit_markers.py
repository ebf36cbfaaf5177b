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
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
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
from connectors.kafka.sink.exactly_once_writer import ExactlyOnceWriter
from connectors.kafka.sink.marker_repair import REPAIRED
from connectors.kafka.sink.naming import TransactionalIdNaming
from connectors.kafka.sink.owed_markers import Reason
from connectors.kafka.sink.writer import DeliveryFailed
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


# Where the coordinator skips the marker: 3.x's coordinator waits for the leader and writes
# every marker itself, which the COMMIT test above shows on 3.9.2.
only_where_skipped = pytest.mark.parametrize(
    "brokers", [v for v, skips in SKIPS_THE_MARKER.items() if skips], indirect=True,
    ids=lambda v: f"kafka-{v}",
)  # fmt: skip


@only_where_skipped
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


def _completed(
    admin: TransactionAdmin, tid: str, state: TxnState = TxnState.COMPLETE_COMMIT
) -> TxnDescription:
    """The id once its commit (or ``state``) completed; the brokers may still be settling after
    the restart (a describe can meet a broker that its client does not know yet)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            now = admin.describe([tid])[tid]
        except Errors.KafkaError as exc:
            now, error = None, exc
        else:
            error = None
        if now is not None and now.state is state:
            return now
        assert time.monotonic() < deadline, f"never {state.value}: {now or error}"
        time.sleep(0.5)


@dataclass(frozen=True)
class _ToAbort:
    """A kafka-eos id's producer, initialized, and a partition of a new topic (three, one
    replica each) led by a broker that is not the id's coordinator."""

    brokers: ProcessCluster
    admin: AdminClient
    topic: str
    naming: TransactionalIdNaming
    tid: str
    producer: Producer
    offline: int  # the partition that loses its leader
    down: int  # its leader

    @property
    def bootstrap(self) -> str:
        return self.brokers.bootstrap_servers

    def leaders(self) -> dict[int, int]:
        """Each partition's leader (-1: none)."""
        partitions = self.admin.list_topics(self.topic, timeout=10).topics[self.topic].partitions
        return {p: m.leader for p, m in sorted(partitions.items())}

    def take_the_leader_offline(self) -> None:
        kill_broker(self.brokers, self.down, restart=False)
        deadline = time.monotonic() + 60
        while self.leaders()[self.offline] >= 0:
            assert time.monotonic() < deadline, "the partition's leader never went offline"
            time.sleep(0.5)


def _a_transaction_to_abort(brokers: ProcessCluster) -> _ToAbort:
    bootstrap = brokers.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    naming = TransactionalIdNaming(f"p-{uuid.uuid4().hex[:8]}", "0123abcd")
    tid = naming.transactional_id(0, 0)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid})
    producer.init_transactions(30)
    with TransactionAdmin({"bootstrap.servers": bootstrap}) as txn_admin:
        coordinator = describe(txn_admin, tid).coordinator_id
    # A node an earlier test restarted may take no new partition for a while: all three may
    # land on the coordinator. Then another topic, until one is led elsewhere.
    for _ in range(20):
        topic = f"t-{uuid.uuid4().hex[:12]}"
        for future in admin.create_topics([NewTopic(topic, 3, 1)]).values():
            future.result(30)
        leaders = admin.list_topics(topic, timeout=10).topics[topic].partitions
        elsewhere = [
            (p, m.leader) for p, m in sorted(leaders.items()) if m.leader not in (coordinator, -1)
        ]
        if elsewhere:
            break
        time.sleep(1)
    assert elsewhere, "every new topic's partitions were led by the id's coordinator"
    offline, down = elsewhere[0]
    return _ToAbort(brokers, admin, topic, naming, tid, producer, offline, down)


@only_where_skipped
def test_a_skipped_abort_marker_is_written_before_the_id_can_write_again(
    brokers: ProcessCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """The driver fences a task's transaction (Spark's abort of a failed batch, or the sweep
    of a lingering one) while the leader of one of its partitions is offline. A 4.x
    coordinator skips that partition's ABORT marker too, and completes the abort. When a later
    transaction of the same id writes there (a task of a later batch that takes the id again),
    it joins the aborted range, and its commit makes the aborted records visible: a duplicate
    of their replay (without the sink's repair, this test's last read shows them). The fence
    waits for the leader and writes the marker itself."""
    t = _a_transaction_to_abort(brokers)
    bootstrap, topic, tid, producer, offline = t.bootstrap, t.topic, t.tid, t.producer, t.offline
    live = next(p for p, leader in t.leaders().items() if leader != t.down)
    producer.begin_transaction()
    for n in range(10):
        producer.produce(topic, value=f"aborted-{n}".encode(), partition=offline)
        producer.produce(topic, value=f"aborted-live-{n}".encode(), partition=live)
    assert producer.flush(30) == 0
    with TransactionAdmin({"bootstrap.servers": bootstrap}) as txn_admin:
        now = describe(txn_admin, tid)
    aborted = Committable(tid, now.producer_id, now.epoch, 20, now.partitions, now.start_time_ms)
    committer = KafkaCommitter({"bootstrap.servers": bootstrap}, t.naming, 60.0)
    try:
        t.take_the_leader_offline()
        # The driver's fence: it waits for the leader.
        fence = threading.Thread(target=committer.abort, args=(aborted,))
        with caplog.at_level("WARNING", logger="connectors.kafka.sink.marker_repair"):
            fence.start()
            time.sleep(2)
            assert fence.is_alive(), "the fence returned while a partition had no leader"
            brokers.start_node(t.down)
            fence.join(90)
        assert not fence.is_alive(), "the fence never returned"
    finally:
        committer.close()
    tp = TopicPartition(topic, offline)
    back = time.monotonic() + 60
    while not _leader_answers(bootstrap, [tp]):
        assert time.monotonic() < back, "the restarted leader never answered"
        time.sleep(1)
    with TransactionAdmin({"bootstrap.servers": bootstrap}) as txn_admin:
        assert open_on_partitions(txn_admin.kafka_admin, [tp]) == [], "the range stayed open"
    repaired = [r for r in caplog.records if r.getMessage().startswith(REPAIRED)]
    assert len(repaired) == 1, repaired
    assert stable_and_end(bootstrap, topic, offline) == (11, 11), "10 records and a marker"

    # A later batch's task takes the aborted id again and commits on the same partition.
    later = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid})
    later.init_transactions(30)
    later.begin_transaction()
    for n in range(10):
        later.produce(topic, value=f"later-{n}".encode(), partition=offline)
    assert later.flush(30) == 0
    later.commit_transaction(30)
    # Read once its COMMIT marker is in: commit_transaction returns before the coordinator
    # writes the markers, and a CI rehearsal read nothing yet.
    settled = time.monotonic() + 30
    while stable_and_end(bootstrap, topic, offline) != (22, 22):  # and 10 records and a marker
        assert time.monotonic() < settled, stable_and_end(bootstrap, topic, offline)
        time.sleep(0.2)
    expected = Counter(f"later-{n}" for n in range(10))
    assert values(bootstrap, topic, "read_committed") == expected, "aborted records visible"


@only_where_skipped
def test_a_task_that_joined_an_aborted_range_fails_its_pre_commit(
    brokers: ProcessCluster,
) -> None:
    """An abort the driver never saw (here a producer's own, as the coordinator's timeout would
    be) while a partition's leader is offline: a 4.x coordinator skips that partition's ABORT
    marker, and nobody writes it. The next task to take the id writes elsewhere and commits;
    the one after it writes to the partition and joins the aborted range. Its pre-commit must
    fail (without the check, or with it only on the first take after an abort, its commit
    would make the aborted records visible), and the driver's fence then aborts the whole
    range."""
    t = _a_transaction_to_abort(brokers)
    bootstrap, topic, tid, producer, offline = t.bootstrap, t.topic, t.tid, t.producer, t.offline
    producer.begin_transaction()
    for n in range(10):
        producer.produce(topic, value=f"aborted-{n}".encode(), partition=offline)
    assert producer.flush(30) == 0
    t.take_the_leader_offline()
    # The producer's own abort.
    abort = threading.Thread(target=producer.abort_transaction, args=(90,))
    abort.start()
    time.sleep(2)
    brokers.start_node(t.down)
    abort.join(90)
    assert not abort.is_alive(), "the abort never returned"
    tp = TopicPartition(topic, offline)
    back = time.monotonic() + 60
    while not _leader_answers(bootstrap, [tp]):
        assert time.monotonic() < back, "the restarted leader never answered"
        time.sleep(1)

    def rows(texts: list[str], partition: int) -> pa.RecordBatch:
        at = pa.array([partition] * len(texts), pa.int32())
        return pa.RecordBatch.from_pydict({"value": texts, "partition": at})

    def writer() -> ExactlyOnceWriter:
        return ExactlyOnceWriter({"bootstrap.servers": bootstrap}, topic, [tid], timeout_s=30)

    elsewhere = [f"elsewhere-{n}" for n in range(5)]
    later = [f"later-{n}" for n in range(5)]
    other = next(p for p in t.leaders() if p != offline)
    with TransactionAdmin({"bootstrap.servers": bootstrap}) as txn_admin:
        # Its markers written, as the next batch would find it.
        _completed(txn_admin, tid, TxnState.COMPLETE_ABORT)
    committer = KafkaCommitter({"bootstrap.servers": bootstrap}, t.naming, 60.0)
    try:
        first = writer().write_and_pre_commit(1, [rows(elsewhere, other)])
        assert committer.commit_all([first]) == []
        with TransactionAdmin({"bootstrap.servers": bootstrap}) as txn_admin:
            _completed(txn_admin, tid)  # its markers written, as the next batch would find it
        with pytest.raises(DeliveryFailed, match="joined an aborted transaction's records"):
            writer().write_and_pre_commit(2, [rows(later, offline)])
        committer.abort_lingering([])  # the driver's sweep
        assert values(bootstrap, topic, "read_committed") == Counter(elsewhere)
    finally:
        committer.close()
    stable, end = stable_and_end(bootstrap, topic, offline)
    assert stable == end, "a range stayed open"
