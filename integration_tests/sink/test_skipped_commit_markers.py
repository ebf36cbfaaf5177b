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

The case is made deterministic with a partition of one replica: its leader is killed between
the transaction's records and its commit. In the chaos harness it took a leader of three
replicas killed as its batch's EndTxns went out, before the next leader was elected.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from collections.abc import Iterator

import pytest
from click.testing import CliRunner
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import errors as Errors
from kafka.structs import TopicPartition

from checkpoint.deadline import Deadline
from connectors.kafka.end_txn import EndTxnTarget
from connectors.kafka.sink.naming import TransactionalIdNaming
from connectors.kafka.transactions import TransactionAdmin
from connectors.kafka.txn_state import TxnDescription, TxnState
from integration_tests.kafka_fixtures import running_cluster
from integration_tests.sink.harness import kill_broker
from integration_tests.sink.transactions import stable_and_end, values
from kafka_eos.cluster import ProcessCluster
from kafka_eos.commands.txn import command as txn_command
from kafka_eos.operations.hanging import abort_hanging, find_hanging, open_on_partitions

pytestmark = [pytest.mark.kafka]

# The releases whose coordinator skips the marker; a release that fixes it fails the test below,
# which then tells docs/reliability.md and docs/cli.md to change.
SKIPS_THE_MARKER = {"4.3.1": True, "3.9.2": False}


@pytest.fixture(params=sorted(SKIPS_THE_MARKER), ids=lambda v: f"kafka-{v}")
def brokers(request: pytest.FixtureRequest) -> Iterator[ProcessCluster]:
    with running_cluster("process", request.param, nodes=3) as cluster:
        assert isinstance(cluster, ProcessCluster)
        yield cluster


def _leader_answers(bootstrap: str, tp: TopicPartition) -> bool:
    """Whether a fresh admin reaches the partition's leader: right after a restart a broker's
    metadata may name the leader but not list it yet (kafka-python: UnknownBrokerIdError), or
    list it before it accepts connections."""
    try:
        with TransactionAdmin({"bootstrap.servers": bootstrap}) as txn_admin:
            open_on_partitions(txn_admin.kafka_admin, [tp])
        return True
    except (Errors.UnknownBrokerIdError, Errors.NodeNotReadyError, Errors.KafkaConnectionError):
        return False


def test_a_commit_while_a_partitions_leader_is_offline(brokers: ProcessCluster) -> None:
    bootstrap = brokers.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = f"t-{uuid.uuid4().hex[:12]}"
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])[topic].result(30)
    prefix = f"p-{uuid.uuid4().hex[:8]}"
    tid = TransactionalIdNaming(prefix, "0123abcd").transactional_id(0, 0)  # a kafka-eos sink's
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid})
    producer.init_transactions(30)
    with TransactionAdmin({"bootstrap.servers": bootstrap}) as txn_admin:
        described = txn_admin.describe([tid])[tid]
    assert described is not None
    # A partition led by another broker than the transaction's coordinator.
    partitions = admin.list_topics(topic, timeout=10).topics[topic].partitions
    partition, leader = next(
        (p, m.leader) for p, m in sorted(partitions.items()) if m.leader != described.coordinator_id
    )
    producer.begin_transaction()
    for n in range(10):
        producer.produce(topic, value=str(n).encode(), partition=partition)
    assert producer.flush(30) == 0
    kill_broker(brokers, leader, restart=False)
    deadline = time.monotonic() + 60
    while admin.list_topics(topic, timeout=10).topics[topic].partitions[partition].leader >= 0:
        assert time.monotonic() < deadline, "the partition's leader never went offline"
        time.sleep(0.5)
    # The kafka-eos driver's commit: EndTxn v5 where the coordinator speaks transactions V2.
    with TransactionAdmin({"bootstrap.servers": bootstrap}) as txn_admin:
        target = EndTxnTarget(tid, described.producer_id, described.epoch)
        ended = txn_admin.end_transactions([target], commit=True, deadline=Deadline(60))
    assert ended[tid].error is None, ended[tid]
    brokers.start_node(leader)
    tp = TopicPartition(topic, partition)
    back = time.monotonic() + 60
    while not _leader_answers(bootstrap, tp):
        assert time.monotonic() < back, "the restarted leader never answered"
        time.sleep(1)
    with TransactionAdmin({"bootstrap.servers": bootstrap}) as txn_admin:
        now = _completed(txn_admin, tid)
        open_now = open_on_partitions(txn_admin.kafka_admin, [tp])
        if not SKIPS_THE_MARKER[brokers.version]:
            assert open_now == [], "the COMMIT marker was written once the leader came back"
            return
        assert [(o.producer_id, o.start_offset) for o in open_now] == [(now.producer_id, 0)], (
            "the coordinator committed, but the marker never reached the partition (KAFKA-20734)"
        )
        [hanging] = find_hanging(txn_admin, [tp], older_than_ms=0, now_ms=int(time.time() * 1000))
        refused = abort_hanging(txn_admin, hanging)
    assert refused is not None and "its COMMIT marker never reached this partition" in refused
    assert values(bootstrap, topic, "read_committed") == Counter()

    # The repair: the COMMIT marker the coordinator decided, written by the operator's command.
    cluster = ["--bootstrap-servers", bootstrap, "--topic", topic, "--older-than", "0s"]
    repaired = CliRunner().invoke(
        txn_command,
        ["find-hanging", *cluster, "--prefix", prefix, "--commit", "--abort", "--yes", "--json"],
    )
    assert repaired.exit_code == 0, repaired.output
    [entry] = json.loads(repaired.stdout)["hanging"]
    assert (entry["committed"], entry["aborted"], entry["error"]) == (True, None, None)
    assert values(bootstrap, topic, "read_committed") == Counter(str(n) for n in range(10))
    assert stable_and_end(bootstrap, topic, partition) == (11, 11), "10 records, then the marker"


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
