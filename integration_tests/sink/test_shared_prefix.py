"""Two queries with one transactionalIdPrefix never abort each other's transactions.

The usual cause is a redeploy on a new checkpoint location while the old query still runs.
Before ids carried their query's owner (a fingerprint of Spark's query id), each
query's sweep of lingering transactions aborted every open transaction of the prefix,
including the other query's decided ones: a loss. Now the sweep aborts only its own, and a
foreign owner's open transaction stops the query before anything is decided.
"""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

from checkpoint.store import SnapshotStore
from checkpoint.two_phase_commit import TwoPhaseCommit
from connectors.kafka.sink.committer import KafkaCommitter
from connectors.kafka.sink.errors import PrefixConflictError
from connectors.kafka.sink.exactly_once_writer import ExactlyOnceWriter
from connectors.kafka.sink.naming import TransactionalIdNaming, owner_of
from connectors.kafka.sink.owners import registry_group
from connectors.kafka.transactions import TransactionAdmin
from connectors.kafka.txn_state import TxnState
from integration_tests.conftest import create_topic
from integration_tests.sink.transactions import commit_visibly, describe, values, wait_until_ended
from kafka_eos.cluster import KafkaCluster

pytestmark = pytest.mark.kafka


def rows(tag: str, count: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"value": [f"{tag}-{i}" for i in range(count)]})


def test_a_second_query_on_the_prefix_stops_before_deciding_and_aborts_only_its_own(
    versioned_kafka: KafkaCluster, admin: TransactionAdmin, tmp_path: Path
) -> None:
    bootstrap = versioned_kafka.bootstrap_servers
    topic = create_topic(bootstrap, partitions=2)
    config = {"bootstrap.servers": bootstrap, "transaction.timeout.ms": "60000"}
    prefix = f"shared-{uuid.uuid4().hex[:8]}"
    old_location, new_location = str(tmp_path / "old"), str(tmp_path / "new")
    old = TransactionalIdNaming(prefix, owner_of(str(uuid.uuid4())))  # Spark's query ids
    new = TransactionalIdNaming(prefix, owner_of(str(uuid.uuid4())))
    silent = TransactionalIdNaming(prefix, owner_of(str(uuid.uuid4())))  # never registered

    # The old query's driver recorded its location when it built the writer (the owner
    # registry); its batch is pre-committed (about to be decided) when the new one commits.
    old_committer = KafkaCommitter(config, old, timeout_s=30, location=old_location)
    try:
        old_committer.register_location([(topic, 0)])
    finally:
        old_committer.close()
    old_txn = ExactlyOnceWriter(config, topic, old.slots(0, 0, 0), 30.0).write_and_pre_commit(
        7, [rows("old", 5)]
    )
    silent_txn = ExactlyOnceWriter(config, topic, silent.slots(1, 0, 0), 30.0).write_and_pre_commit(
        3, [rows("silent", 1)]
    )
    new_txn = ExactlyOnceWriter(config, topic, new.slots(0, 0, 0), 30.0).write_and_pre_commit(
        0, [rows("new", 3)]
    )
    assert old_txn.transactional_id != new_txn.transactional_id  # same task, same prefix
    # A dead attempt of the new query, which its sweep must abort.
    stray = ExactlyOnceWriter(config, topic, new.slots(1, 0, 0), 30.0).write_and_pre_commit(
        0, [rows("stray", 2)]
    )

    committer = KafkaCommitter(config, new, timeout_s=30, location=new_location)
    protocol = TwoPhaseCommit(
        SnapshotStore(tmp_path / "new-decisions"), committer, sweeps_lingering=True
    )
    try:
        with pytest.raises(PrefixConflictError) as refused:
            protocol.complete(0, [new_txn])
    finally:
        committer.close()

    message = str(refused.value)
    assert f"transactionalIdPrefix {prefix!r} is in use by another query" in message
    # Both queries' checkpoint locations are named, so the operator can find the other one.
    assert "Other queries: owner " in message
    assert (
        f"owner {old.owner} (checkpoint {old_location!r}, registered 0 min ago): "
        f"{old_txn.transactional_id}"
    ) in message
    assert (
        f"owner {silent.owner} (checkpoint location unknown: no registration in consumer group"
        in message
    )
    # Two other owners, one of them unlocated: no abort command that could drop a decided batch.
    assert "without its checkpoint location the abort cannot tell" in message
    assert f"This query: checkpoint {new_location!r}, owner {new.owner}" in message
    # The registry entry is an offset of -1 ("no position"): lag monitors show no lag for it.
    group = registry_group(prefix, old.owner)
    assert {
        o.offset for o in admin.kafka_admin.list_group_offsets({group: None})[group].values()
    } == {-1}
    assert protocol.store.checkpoint_ids() == []  # nothing decided
    # The other query's transaction is untouched; this query's stray is aborted.
    old_now = describe(admin, old_txn.transactional_id)
    assert (old_now.state, old_now.epoch) == (TxnState.ONGOING, old_txn.epoch)
    assert describe(admin, stray.transactional_id).state in (
        TxnState.PREPARE_ABORT,
        TxnState.COMPLETE_ABORT,
    )
    # Spark aborts the refused batch: its own transaction goes, the other query's stays.
    protocol.abort(0, [new_txn])
    committer.close()
    assert describe(admin, new_txn.transactional_id).state in (
        TxnState.PREPARE_ABORT,
        TxnState.COMPLETE_ABORT,
    )
    assert describe(admin, old_txn.transactional_id).state == TxnState.ONGOING
    # The old query still commits its batch: nothing of it was lost.
    old_committer = KafkaCommitter(config, old, timeout_s=30, location=old_location)
    try:
        commit_visibly(old_committer, old_txn)
        old_committer.abort(silent_txn)  # the third query is gone: its batch was never decided
        wait_until_ended(admin, silent_txn.transactional_id)
    finally:
        old_committer.close()
    expected = Counter(rows("old", 5)["value"].to_pylist())
    assert values(bootstrap, topic, "read_committed") == expected
