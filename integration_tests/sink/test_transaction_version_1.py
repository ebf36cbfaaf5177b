"""The sink's commit on a Kafka 4.x cluster that does not run transactions V2: formatted with
``transaction.version=1``, and with 0 (what a cluster upgraded from 3.x has until its operator
finalizes the feature).

Kafka takes an EndTxn's semantics from the request's version alone (v5 is V2: the epoch moves
on at every EndTxn), on any cluster; the finalized ``transaction.version`` picks the
transaction log's record format. Seen on 4.3.1: both clusters advertise EndTxn v5. At level 1
a v5 commits and bumps the epoch exactly as at level 2; at level 0 a v5 is refused with
UNSUPPORTED_VERSION and wedges the transaction (Ongoing, CONCURRENT_TRANSACTIONS to every later
EndTxn, not aborted at its timeout) until its coordinator reloads. So the committer sends v5
only at level 2, as Kafka's own producer does, and v4 (which keeps the epoch: V1) at 0 and 1,
and the commit oracle expects E + 1 exactly where it sent v5
(``connectors/kafka/txn_coordinators.py``). librdkafka's
own EndTxn is v1 on every level: the writer's producers never bump.

What the sink relies on, on each cluster, with the real writer and committer (no Spark): a
pre-committed transaction commits (fault-matrix (c)); a second commit of it is "already
committed", not lost ((d): the re-driven commit after a crash); an aborted or fenced one, or
one the broker aborted at its timeout, is never taken for committed.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any, NamedTuple

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from kafka.net.compat import KafkaNetClient

from checkpoint.deadline import Deadline
from checkpoint.model import Committable
from connectors.kafka.sink.committer import KafkaCommitter
from connectors.kafka.sink.errors import CommitUndeterminedError, TransactionLostError
from connectors.kafka.sink.exactly_once_writer import ExactlyOnceWriter
from connectors.kafka.sink.naming import TransactionalIdNaming
from connectors.kafka.sink.outcome import Outcome, outcome
from connectors.kafka.transactions import TransactionAdmin
from connectors.kafka.txn_coordinators import (
    api_versions_request,
    max_versions,
    send,
    transaction_version,
    usable_versions,
)
from connectors.kafka.txn_state import TxnState
from integration_tests.conftest import create_topic
from integration_tests.kafka_fixtures import ClusterPool, cluster_spec
from integration_tests.sink.transactions import describe, standing, values, wait_until_committed
from kafka_eos.cluster import DEFAULT_KAFKA_VERSION, KafkaCluster

pytestmark = pytest.mark.kafka

BATCH_ID = 3
OWNER = "7e57c0de"
END_TXN = 26  # API key


class Variant(NamedTuple):
    label: str  # the cluster's version label (integration_tests/kafka_fixtures.py)
    end_txn_sent: int  # the EndTxn version the committer sends its coordinators
    bumps: bool  # whether the committer's EndTxn moves the epoch on


VARIANTS = [
    Variant(f"{DEFAULT_KAFKA_VERSION}-tv1", 4, False),
    Variant(f"{DEFAULT_KAFKA_VERSION}-tv0", 4, False),
]


@pytest.fixture(scope="module", params=VARIANTS, ids=lambda v: f"kafka-{v.label}")
def tv_kafka(
    request: pytest.FixtureRequest, kafka_clusters: ClusterPool
) -> tuple[KafkaCluster, Variant]:
    """The variant's cluster from the session's pool, which checks that nothing was left open
    on it (the fault matrix's `4.3.1-tv1` cases share it)."""
    variant: Variant = request.param
    return kafka_clusters.get(variant.label), variant


class Setting(NamedTuple):
    bootstrap: str
    topic: str
    config: dict[str, Any]  # the producer config as the sink builds it
    naming: TransactionalIdNaming
    variant: Variant


@pytest.fixture
def setting(tv_kafka: tuple[KafkaCluster, Variant]) -> Setting:
    cluster, variant = tv_kafka
    bootstrap = cluster.bootstrap_servers
    return Setting(
        bootstrap,
        create_topic(bootstrap, partitions=2),
        {"bootstrap.servers": bootstrap, "transaction.timeout.ms": "60000"},
        TransactionalIdNaming(f"tv-{uuid.uuid4().hex[:8]}", OWNER),
        variant,
    )


@pytest.fixture
def admin(setting: Setting) -> Iterator[TransactionAdmin]:
    with TransactionAdmin({"bootstrap.servers": setting.bootstrap}) as client:
        yield client


@pytest.fixture
def committer(setting: Setting) -> Iterator[KafkaCommitter]:
    committer = KafkaCommitter(setting.config, setting.naming, timeout_s=30)
    yield committer
    committer.close()


def task_input(attempt: str, count: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "key": [f"key-{i}" for i in range(count)],
            "value": [f"{attempt}-{i}" for i in range(count)],
        }
    )


def written(attempt: str, count: int) -> Counter[str]:
    return Counter(task_input(attempt, count)["value"].to_pylist())


def pre_commit(setting: Setting, attempt: str, count: int, **config: str) -> Committable:
    """A task's transaction, written and pre-committed by the sink's own writer."""
    writer = ExactlyOnceWriter(
        {**setting.config, **config}, setting.topic, setting.naming.slots(0, 0, 0), 30.0
    )
    return writer.write_and_pre_commit(BATCH_ID, [task_input(attempt, count)])


def assert_refused(
    committer: KafkaCommitter, admin: TransactionAdmin, c: Committable, expected: Outcome
) -> None:
    """Neither the committer nor the describe-based oracle of recovery and ``txn resolve``
    takes the transaction for committed; each says what the coordinator's evidence shows:
    lost when it shows this very transaction aborted, undetermined when the id moved on."""
    error = TransactionLostError if expected is Outcome.LOST else CommitUndeterminedError
    with pytest.raises(error):
        committer.commit(c)
    now = describe(admin, c.transactional_id)
    bumps = admin.epoch_bumps_on_end_at(now.coordinator_id)
    assert not now.is_commit_of(c.producer_id, c.epoch, bump_possible=bumps), now
    assert outcome(c, now, bump_possible=bumps) is expected


def test_the_cluster_runs_at_its_transaction_version_and_the_committer_speaks_to_it(
    setting: Setting, admin: TransactionAdmin
) -> None:
    """The coordinator advertises EndTxn v5 at every level; the committer sends v5 only where
    the finalized level can store it, and expects a bumped epoch exactly there."""
    net = KafkaNetClient(bootstrap_servers=setting.bootstrap)
    try:
        net.check_version()
        node = net.least_loaded_node()
        future = send(net, node, api_versions_request())
        net.poll(timeout_ms=10_000, future=future)
        assert future.succeeded(), future.exception
        response = future.value
    finally:
        net.close()
    features = cluster_spec(setting.variant.label).features
    assert transaction_version(response) == features["transaction.version"]
    assert max_versions(response)[END_TXN] == 5, "a 4.x broker advertises EndTxn v5"
    assert usable_versions(response)[END_TXN] == setting.variant.end_txn_sent
    assert admin.epoch_bumps_on_end_at(node) is setting.variant.bumps


def test_a_pre_committed_transaction_commits_and_a_second_commit_is_already_committed(
    setting: Setting, admin: TransactionAdmin, committer: KafkaCommitter
) -> None:
    """Fault-matrix (c) and (d) without Spark: the driver commits a decided transaction, and
    commits it again as a restarted driver re-drives its decision."""
    c = pre_commit(setting, "a", 6)
    committer.verify(BATCH_ID, [c])
    committer.commit(c)
    wait_until_committed(admin, c)  # CompleteCommit, and the oracle takes it for c's commit
    now = describe(admin, c.transactional_id)
    assert standing(now) == (
        TxnState.COMPLETE_COMMIT,
        c.producer_id,
        c.epoch + 1 if setting.variant.bumps else c.epoch,
    ), "the commit's epoch is not the one the oracle expects"

    committer.commit(c)  # the re-driven commit: already committed, not lost
    again = describe(admin, c.transactional_id)
    assert standing(again) == standing(now), "the second commit changed the transaction"
    bumps = admin.epoch_bumps_on_end_at(again.coordinator_id)
    assert outcome(c, again, bump_possible=bumps) is Outcome.COMMITTED
    assert values(setting.bootstrap, setting.topic, "read_committed") == written("a", 6)
    assert values(setting.bootstrap, setting.topic, "read_uncommitted") == written("a", 6)


def test_an_aborted_pre_commit_is_not_taken_for_the_next_commit_of_its_id(
    setting: Setting, admin: TransactionAdmin, committer: KafkaCommitter
) -> None:
    """The driver aborts A (the sweep of lingering transactions: a fence), the id's next
    transaction B commits; committing A afterwards must fail loudly, never pass for B's
    commit. The coordinator shows only B, so A's outcome is undetermined (its records are in
    fact lost). An oracle that accepted any E + 1 on such a coordinator would take B's commit
    for A's."""
    a = pre_commit(setting, "a", 3)
    committer.abort(a)
    b = pre_commit(setting, "b", 2)
    assert (b.transactional_id, b.producer_id) == (a.transactional_id, a.producer_id)
    committer.commit(b)
    wait_until_committed(admin, b)

    assert_refused(committer, admin, a, Outcome.UNDETERMINED)
    assert values(setting.bootstrap, setting.topic, "read_committed") == written("b", 2)
    assert values(setting.bootstrap, setting.topic, "read_uncommitted") == written(
        "a", 3
    ) + written("b", 2)


def test_a_fenced_pre_commit_is_not_taken_for_committed(
    setting: Setting, admin: TransactionAdmin, committer: KafkaCommitter
) -> None:
    """Another producer initializes the id of a pre-committed transaction (a zombie task
    attempt that does not check, a foreign application): the coordinator aborts it, bumping
    the epoch, and it must never count as committed."""
    a = pre_commit(setting, "a", 4)
    rival = Producer(
        {"bootstrap.servers": setting.bootstrap, "transactional.id": a.transactional_id}
    )
    rival.init_transactions(30)
    assert describe(admin, a.transactional_id).epoch > a.epoch + 1  # fenced at E + 1, then E + 2

    # The rival's init fenced A, then moved the id on to an empty epoch: A's outcome is no
    # longer shown (4.x forgets the start time at InitProducerId).
    assert_refused(committer, admin, a, Outcome.UNDETERMINED)
    assert values(setting.bootstrap, setting.topic, "read_committed") == {}
    assert values(setting.bootstrap, setting.topic, "read_uncommitted") == written("a", 4)


def test_a_transaction_the_broker_aborted_at_its_timeout_is_not_taken_for_committed(
    setting: Setting, admin: TransactionAdmin, committer: KafkaCommitter
) -> None:
    """The coordinator's own abort (timeout) bumps the epoch: CompleteAbort at E + 1 must not
    read as a bumped commit."""
    a = pre_commit(setting, "a", 3, **{"transaction.timeout.ms": "3000"})
    give_up = Deadline(30)
    while (now := describe(admin, a.transactional_id)).state != TxnState.COMPLETE_ABORT:
        assert not give_up.expired(), f"the broker did not abort at the timeout: {now}"
        time.sleep(0.5)
    assert (now.producer_id, now.epoch) == (a.producer_id, a.epoch + 1), now

    assert_refused(committer, admin, a, Outcome.LOST)  # CompleteAbort with its own start time
    assert values(setting.bootstrap, setting.topic, "read_committed") == {}
