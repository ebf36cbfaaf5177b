"""``kafka-eos txn list``, ``txn abort`` and ``txn resolve`` against a real broker.

Faults injected: a transaction left open by a producer that never ends it (a lingering
transaction holding back read_committed readers), the same transaction named by an unconfirmed
decision of the sink (aborting it would lose decided records), a decided transaction that the
broker aborts on its timeout before its commit (a stuck batch), and an unreachable cluster.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner, Result
from confluent_kafka import KafkaException, Producer
from kafka.admin import KafkaAdminClient

from checkpoint.model import Committable, Snapshot
from checkpoint.store import SnapshotStore
from connectors.kafka.sink.committer import KafkaCommitter
from connectors.kafka.sink.errors import TransactionLostError
from connectors.kafka.sink.exactly_once_writer import ExactlyOnceWriter
from connectors.kafka.sink.naming import TransactionalIdNaming, derived_prefix, owner_of
from connectors.kafka.sink.options import decision_location
from connectors.kafka.sink.owners import OwnerRegistry
from connectors.kafka.transactions import TransactionAdmin
from connectors.kafka.txn_state import TxnState
from integration_tests.sink.transactions import (
    commit_visibly,
    describe,
    standing,
    values,
    wait_until_committed,
    wait_until_ended,
)
from kafka_eos.cluster import KafkaCluster
from kafka_eos.cluster.ports import free_port
from kafka_eos.commands.txn import command
from kafka_eos.operations.drain import drain

pytestmark = pytest.mark.kafka


def txn(*args: str) -> Result:
    return CliRunner().invoke(command, list(args), catch_exceptions=False)


def committed_values(bootstrap_servers: str, topic: str) -> list[bytes | None]:
    return [r.value for r in drain(bootstrap_servers, topic, "read_committed", timeout_s=30)]


@pytest.fixture
def prefix() -> str:
    return f"cli-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def open_transaction(
    kafka: KafkaCluster, topic_factory: Callable[..., str], prefix: str
) -> Iterator[tuple[str, str]]:
    """(transactional id, topic): ``<prefix>-0`` has produced one record and never ends.

    Behind it a committed record of another producer: read_committed readers see it only once
    the open transaction ends.
    """
    bootstrap = kafka.bootstrap_servers
    topic = topic_factory()
    tid = f"{prefix}-0"
    lingering = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": tid,
            "transaction.timeout.ms": 300_000,  # it must not time out during the test
        }
    )
    lingering.init_transactions(30)
    lingering.begin_transaction()
    lingering.produce(topic, key=b"k0", value=b"open")
    lingering.flush(30)
    committed = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{prefix}-late"})
    committed.init_transactions(30)
    committed.begin_transaction()
    committed.produce(topic, key=b"k1", value=b"late")
    committed.commit_transaction(30)
    yield tid, topic
    # Never close() the lingering producer during the test: that would abort it. Afterwards,
    # end it (if a test left it open) so it does not hold the LSO until its timeout.
    with contextlib.suppress(KafkaException):
        lingering.abort_transaction(10)
    with contextlib.suppress(KafkaException):  # fenced by the test's EndTxn: a fatal state
        lingering.close()
    committed.close()


def test_list_shows_the_lingering_transaction_and_abort_releases_readers(
    kafka: KafkaCluster, open_transaction: tuple[str, str], prefix: str
) -> None:
    bootstrap = kafka.bootstrap_servers
    tid, topic = open_transaction
    assert committed_values(bootstrap, topic) == []  # the open transaction holds the LSO

    listed = txn("list", "--bootstrap-servers", bootstrap, "--prefix", prefix, "--json")
    assert listed.exit_code == 0, listed.output
    [row] = json.loads(listed.stdout)["transactions"]
    assert (row["transactional_id"], row["state"]) == (tid, "Ongoing")
    assert row["partitions"] == [{"topic": topic, "partition": 0}]
    assert row["age_s"] is not None and 0 <= row["age_s"] < 300

    aborted = txn("abort", "--bootstrap-servers", bootstrap, "--prefix", prefix, "--yes")
    assert aborted.exit_code == 0, aborted.output
    assert f"aborted {tid}" in aborted.stdout
    assert "without --checkpoint-location" in aborted.stderr

    with TransactionAdmin({"bootstrap.servers": bootstrap}) as admin:
        assert admin.describe([tid])[tid].state != TxnState.ONGOING
        wait_until_ended(admin, tid)  # the fence is answered before the markers are written
    assert committed_values(bootstrap, topic) == [b"late"]
    after = txn("list", "--bootstrap-servers", bootstrap, "--prefix", prefix)
    assert after.stdout == f"no Ongoing transactions of prefix {prefix!r}\n"


def test_abort_refuses_a_transaction_of_an_unconfirmed_decision(
    kafka: KafkaCluster, open_transaction: tuple[str, str], prefix: str, tmp_path: Path
) -> None:
    bootstrap = kafka.bootstrap_servers
    tid, topic = open_transaction
    config = {"bootstrap.servers": bootstrap}
    # The decision as the sink writes it: the task's committable from its describe, then
    # TwoPhaseCommit.complete's Snapshot (offsets live in Spark's log) in the sink's store.
    with TransactionAdmin(config) as admin:
        now = admin.describe([tid])[tid]
    assert now is not None and now.state == TxnState.ONGOING
    committable = Committable(tid, now.producer_id, now.epoch, 1, now.partitions)
    checkpoint = tmp_path / "checkpoint"
    store = SnapshotStore(checkpoint / "kafka-eos-sink")
    store.write(Snapshot(0, prefix, (committable,), decided_at_ms=int(time.time() * 1000)))

    refused = txn(
        "abort",
        "--bootstrap-servers",
        bootstrap,
        "--prefix",
        prefix,
        "--checkpoint-location",
        str(checkpoint),
    )
    assert refused.exit_code == 1, refused.output
    assert f"REFUSED {tid}" in refused.stderr and "Restart the query" in refused.stderr
    with TransactionAdmin(config) as admin:
        still = admin.describe([tid])[tid]
    assert still is not None
    assert standing(still) == (TxnState.ONGOING, now.producer_id, now.epoch)

    # What the refusal preserved: the restarted query's recovery commits the decided records.
    committer = KafkaCommitter(config)
    try:
        commit_visibly(committer, committable)
    finally:
        committer.close()
    store.confirm(0)
    assert committed_values(bootstrap, topic) == [b"open", b"late"]


def pre_commit(
    bootstrap: str, topic: str, tid: str, keys: list[str], timeout_ms: int
) -> Committable:
    """A task's transaction of ``keys``, pre-committed as the sink's writer leaves it."""
    config = {"bootstrap.servers": bootstrap, "transaction.timeout.ms": str(timeout_ms)}
    rows = pa.RecordBatch.from_pydict({"key": keys, "value": [f"v-{k}" for k in keys]})
    return ExactlyOnceWriter(config, topic, [tid], 30.0).write_and_pre_commit(1, [rows])


def test_resolve_accepts_the_loss_of_exactly_the_lost_transaction(
    kafka: KafkaCluster, topic_factory: Callable[..., str], prefix: str, tmp_path: Path
) -> None:
    """Batch 1 is decided with three transactions: the driver committed the first and died;
    the broker aborted the third on its 5 s timeout; the second is still open. Every restart
    would stop on the third. Accepting its loss commits the second and confirms the batch."""
    bootstrap = kafka.bootstrap_servers
    topic = topic_factory(partitions=2)
    keys = {n: [f"{n}-{i}" for i in range(25)] for n in ("committed", "committable", "lost")}
    committed = pre_commit(bootstrap, topic, f"{prefix}-0", keys["committed"], 120_000)
    committable = pre_commit(bootstrap, topic, f"{prefix}-1", keys["committable"], 120_000)
    lost = pre_commit(bootstrap, topic, f"{prefix}-2", keys["lost"], 5_000)
    checkpoint = str(tmp_path / "checkpoint")
    store = SnapshotStore(decision_location(checkpoint))
    decided_at_ms = int(time.time() * 1000)
    store.write(Snapshot(1, prefix, (committed, committable, lost), decided_at_ms=decided_at_ms))
    committer = KafkaCommitter({"bootstrap.servers": bootstrap})
    try:
        committer.commit(committed)  # the driver's first EndTxn, before it died
        deadline = time.monotonic() + 60
        while describe(committer.admin, lost.transactional_id).state != TxnState.COMPLETE_ABORT:
            assert time.monotonic() < deadline, "the broker did not abort it on its timeout"
            time.sleep(1)
        with pytest.raises(TransactionLostError):
            committer.commit(lost)  # what every restart of the query runs into
    finally:
        committer.close()
    cluster = ("--bootstrap-servers", bootstrap, "--checkpoint-location", checkpoint)

    shown = txn("resolve", *cluster, "--json")
    assert shown.exit_code == 1, shown.output
    [batch] = json.loads(shown.stdout)["batches"]
    verdicts = {t["decided"]["transactional_id"]: t["verdict"] for t in batch["transactions"]}
    assert verdicts == {
        committed.transactional_id: "committed",
        committable.transactional_id: "committable",
        lost.transactional_id: "lost",
    }
    assert store.unconfirmed_ids() == [1]  # looking changes nothing

    reason = "integration test: aborted on its timeout"
    accepted = txn("resolve", *cluster, "--accept-loss", "--reason", reason, "--yes")
    assert accepted.exit_code == 0, accepted.output
    confirmation = store.confirmation(1)
    assert confirmation is not None and confirmation.accepted_loss is not None
    assert confirmation.accepted_loss.lost == (lost,)
    assert confirmation.accepted_loss.reason == reason
    assert store.unconfirmed_ids() == []  # recovery skips batch 1: the query goes on

    with TransactionAdmin({"bootstrap.servers": bootstrap}) as admin:
        wait_until_committed(admin, committed)
        wait_until_committed(admin, committable)
    expected = Counter(f"v-{k}" for k in keys["committed"] + keys["committable"])
    assert values(bootstrap, topic, "read_committed") == expected
    # The lost records were written, and are lost: only read_uncommitted sees them.
    lost_values = Counter(f"v-{k}" for k in keys["lost"])
    assert values(bootstrap, topic, "read_uncommitted") == expected + lost_values


def test_an_unreachable_cluster_is_a_one_line_error() -> None:
    """Within its --timeout: the admin's bootstrap once waited kafka-python's 30 s whatever
    the timeout (30 s in CI with --timeout 5)."""
    port = free_port()  # nothing listens on it
    started = time.monotonic()
    result = txn("list", "--bootstrap-servers", f"127.0.0.1:{port}", "--timeout", "5")
    took = time.monotonic() - started
    assert result.exit_code == 2
    assert took < 15, f"--timeout 5 took {took:.1f} s"
    [line] = result.stderr.splitlines()
    assert line.startswith(
        "Error: [KAFKA_EOS.OPERATIONS.TXN_READ_FAILED] listing transactions on "
        f"--bootstrap-servers '127.0.0.1:{port}'"
    )
    assert "Check that the brokers are reachable" in line


def test_list_names_the_query_that_owns_each_prefix(
    kafka: KafkaCluster, topic_factory: Callable[..., str], tmp_path: Path
) -> None:
    """A derived prefix (``kafka-eos-<name>-<hash>``) says little by itself: the listing names
    the checkpoint location each query registered, and says why when none is known."""
    bootstrap = kafka.bootstrap_servers
    topic = topic_factory()
    location = str(tmp_path / "orders")
    prefix = derived_prefix(location)
    registered, silent = (TransactionalIdNaming(prefix, owner_of(str(uuid.uuid4()))) for _ in "ab")
    producers = []
    for naming in (registered, silent):
        producer = Producer(
            {"bootstrap.servers": bootstrap, "transactional.id": naming.transactional_id(0, 0)}
        )
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce(topic, value=b"open")
        producer.flush(30)
        producers.append(producer)
    try:
        with KafkaAdminClient(bootstrap_servers=bootstrap) as admin:
            OwnerRegistry(lambda: admin, bootstrap, prefix).register(
                registered.owner, location, [(topic, 0)]
            )
        listed = txn("list", "--bootstrap-servers", bootstrap, "--prefix", prefix, "--json")
        assert listed.exit_code == 0, listed.output
        rows = json.loads(listed.stdout)["transactions"]
        queries = {row["transactional_id"]: row["query"] for row in rows}
        known, unknown = (queries[n.transactional_id(0, 0)] for n in (registered, silent))
        assert known["checkpoint_location"] == location and known["prefix"] == prefix
        assert known["owner"] == registered.owner and known["unknown_reason"] is None
        assert unknown["checkpoint_location"] is None and unknown["owner"] == silent.owner
        assert "no registration in consumer group" in unknown["unknown_reason"]
        text = txn("list", "--bootstrap-servers", bootstrap, "--prefix", prefix)
        assert location in text.stdout
        assert f"owner {silent.owner}: location unknown" in text.stdout
    finally:
        for producer in producers:
            producer.abort_transaction(30)
