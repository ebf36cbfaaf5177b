"""``kafka-eos txn list`` and ``txn abort`` against a real broker.

Faults injected: a transaction left open by a producer that never ends it (a lingering
transaction holding back read_committed readers), the same transaction named by an unconfirmed
decision of the sink (aborting it would lose decided records), and an unreachable cluster.
"""

from __future__ import annotations

import contextlib
import json
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from confluent_kafka import KafkaException, Producer

from checkpoint.model import Committable, Snapshot
from checkpoint.store import SnapshotStore
from connectors.kafka.committer import KafkaCommitter
from connectors.kafka.drain import drain
from connectors.kafka.transactions import TransactionAdmin, TxnState
from kafka_eos.cluster import KafkaCluster
from kafka_eos.commands.txn import command

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

    assert committed_values(bootstrap, topic) == [b"late"]
    with TransactionAdmin({"bootstrap.servers": bootstrap}) as admin:
        assert admin.describe([tid])[tid].state != TxnState.ONGOING
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
    assert (still.state, still.producer_id, still.epoch) == (
        TxnState.ONGOING,
        now.producer_id,
        now.epoch,
    )

    # What the refusal preserved: the restarted query's recovery commits the decided records.
    committer = KafkaCommitter(config, prefix)
    try:
        committer.commit(committable)
    finally:
        committer.close()
    store.confirm(0)
    assert committed_values(bootstrap, topic) == [b"open", b"late"]


def test_an_unreachable_cluster_is_a_one_line_error() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = txn("list", "--bootstrap-servers", f"127.0.0.1:{port}", "--timeout", "5")
    assert result.exit_code == 2
    [line] = result.stderr.splitlines()
    assert line.startswith(f"Error: listing transactions on --bootstrap-servers '127.0.0.1:{port}'")
    assert "Check that the brokers are reachable" in line
