"""Attempts of one task never fence each other's transactions, and only the accepted attempt's
pre-commit is ever committed.

Spark may run several attempts of one task: a speculative copy, a retry after a lost result, a
zombie of a resubmitted stage (same attempt number in a new stage attempt). Spark accepts one
attempt's result and kills the others asynchronously, so a losing attempt may still start
writing after the driver verified, or decided, the winner's transaction. It must never abort
that transaction (``init_transactions`` on the same id would): each attempt takes an id of its
task that holds no open transaction, and the driver aborts the losers' transactions.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import pyarrow as pa
import pytest
from confluent_kafka import Producer

from checkpoint.model import Committable
from connectors.kafka.sink.committer import KafkaCommitter
from connectors.kafka.sink.errors import CommitUndeterminedError
from connectors.kafka.sink.exactly_once_writer import ExactlyOnceWriter
from connectors.kafka.sink.naming import TransactionalIdNaming
from connectors.kafka.sink.writer import DeliveryFailed
from connectors.kafka.transactions import TransactionAdmin
from connectors.kafka.txn_state import TxnState
from integration_tests.conftest import create_topic
from integration_tests.sink.transactions import describe, standing, values, wait_until_committed
from kafka_eos.cluster import KafkaCluster

pytestmark = pytest.mark.kafka

BATCH_ID = 4
OWNER = "0123abcd"


class _KeepsProducer(ExactlyOnceWriter):
    """The real writer; the test keeps its producer alive to play the zombie attempt."""

    kept: Producer | None = None

    def _open(self, topic: str) -> Producer:
        self.kept = super()._open(topic)
        return self.kept


class _RivalStartsAfterFlush(ExactlyOnceWriter):
    """The real writer; another attempt of the same task, which chose the same id at the same
    moment (both saw it free), runs its init between this one's flush and its describe."""

    rival: Callable[[], Producer]
    rival_producer: Producer | None = None

    def _describe_own_transaction(self) -> Committable:
        self.rival_producer = self.rival()
        return super()._describe_own_transaction()


def task_input(attempt: str, count: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "key": [f"key-{i}" for i in range(count)],
            "value": [f"{attempt}-{i}" for i in range(count)],
        }
    )


class Setting(NamedTuple):
    bootstrap: str
    topic: str
    config: dict[str, Any]  # the producer config as the sink builds it
    prefix: str

    @property
    def naming(self) -> TransactionalIdNaming:
        return TransactionalIdNaming(self.prefix, OWNER)


@pytest.fixture
def setting(versioned_kafka: KafkaCluster) -> Setting:
    bootstrap = versioned_kafka.bootstrap_servers
    return Setting(
        bootstrap,
        create_topic(bootstrap, partitions=2),
        {"bootstrap.servers": bootstrap, "transaction.timeout.ms": "60000"},
        f"zombie-{uuid.uuid4().hex[:8]}",
    )


@pytest.fixture
def committer(setting: Setting) -> Iterator[KafkaCommitter]:
    committer = KafkaCommitter(setting.config, setting.naming, timeout_s=30)
    yield committer
    committer.close()


@pytest.mark.parametrize(
    "rival_attempt",
    [0, 1],
    ids=["zombie-of-a-resubmitted-stage", "speculative-copy"],
)
def test_an_attempt_started_after_the_verification_never_fences_the_verified_transaction(
    setting: Setting,
    admin: TransactionAdmin,
    committer: KafkaCommitter,
    rival_attempt: int,
) -> None:
    """Attempt A pre-commits and the driver verifies it; only then does attempt B of the same
    task start writing. Before attempts took ids of their own, B's init_transactions on A's id
    aborted A's verified transaction, the decision was written anyway, and the commit failed:
    the batch's output of this task was lost."""
    bootstrap, topic, config, _ = setting
    naming = setting.naming
    attempt_a = ExactlyOnceWriter(config, topic, naming.slots(0, 0, 0), 30.0)
    committable_a = attempt_a.write_and_pre_commit(BATCH_ID, [task_input("a", 6)])
    committer.verify(BATCH_ID, [committable_a])

    attempt_b = ExactlyOnceWriter(config, topic, naming.slots(0, rival_attempt, 0), 30.0)
    committable_b = attempt_b.write_and_pre_commit(BATCH_ID, [task_input("b", 4)])
    assert committable_b.transactional_id != committable_a.transactional_id
    now = describe(admin, committable_a.transactional_id)
    assert standing(now) == (TxnState.ONGOING, committable_a.producer_id, committable_a.epoch), (
        "the later attempt touched the verified transaction"
    )

    # The driver decided A (Spark accepted its result): B's transaction is a loser's.
    committer.verify(BATCH_ID, [committable_a])
    committer.abort_lingering([committable_a])
    committer.commit(committable_a)
    wait_until_committed(admin, committable_a)
    assert describe(admin, committable_b.transactional_id).state in (
        TxnState.PREPARE_ABORT,
        TxnState.COMPLETE_ABORT,
    )
    a_values = Counter(task_input("a", 6)["value"].to_pylist())
    b_values = Counter(task_input("b", 4)["value"].to_pylist())
    assert values(bootstrap, topic, "read_committed") == a_values
    assert values(bootstrap, topic, "read_uncommitted") == a_values + b_values  # B wrote
    assert admin.list_transactional_ids(setting.prefix) == [], "a transaction left open"


def test_every_id_of_a_task_held_open_fails_the_attempt_without_fencing_any(
    setting: Setting, admin: TransactionAdmin
) -> None:
    """An attempt never takes an id whose transaction is open, even when no id is free."""
    bootstrap, topic, config, _ = setting
    [only] = setting.naming.slots(0, 0, 0)[:1]
    holder = ExactlyOnceWriter(config, topic, [only], 30.0)
    held = holder.write_and_pre_commit(BATCH_ID, [task_input("a", 2)])
    with pytest.raises(DeliveryFailed, match="every transactional id of this task holds an open"):
        ExactlyOnceWriter(config, topic, [only], 30.0).write_and_pre_commit(
            BATCH_ID, [task_input("b", 2)]
        )
    now = describe(admin, only)
    assert (now.state, now.epoch) == (TxnState.ONGOING, held.epoch)
    assert values(bootstrap, topic, "read_uncommitted") == Counter(
        task_input("a", 2)["value"].to_pylist()
    )
    KafkaCommitter(config, timeout_s=30).abort(held)  # as the driver's sweep would


def test_an_aborted_pre_commit_is_not_taken_for_the_next_commit_of_its_id(
    setting: Setting,
    admin: TransactionAdmin,
    committer: KafkaCommitter,
) -> None:
    """The driver aborts A's transaction (a fence, as recovery does), then the id's next
    transaction B commits. Committing A afterwards must fail, never pass for B's commit: the
    coordinator shows only B, so A's outcome is undetermined (its records are in fact lost)."""
    bootstrap, topic, config, _ = setting
    tid = setting.naming.transactional_id(0, 0)
    committable_a = ExactlyOnceWriter(config, topic, [tid], 30.0).write_and_pre_commit(
        BATCH_ID, [task_input("a", 3)]
    )
    committer.abort(committable_a)
    committable_b = ExactlyOnceWriter(config, topic, [tid], 30.0).write_and_pre_commit(
        BATCH_ID + 1, [task_input("b", 2)]
    )
    committer.commit(committable_b)
    wait_until_committed(admin, committable_b)

    with pytest.raises(CommitUndeterminedError, match="cannot be shown to have committed"):
        committer.commit(committable_a)
    assert values(bootstrap, topic, "read_committed") == Counter(
        task_input("b", 2)["value"].to_pylist()
    )


def test_an_attempt_fenced_after_its_flush_never_names_the_rivals_transaction(
    setting: Setting,
    admin: TransactionAdmin,
    committer: KafkaCommitter,
) -> None:
    """Two attempts of one task chose the same id at the same moment (each saw it free), and
    the second's init lands right after the first's flush. The first's describe then sees the
    other attempt's open, possibly half-written transaction; it must fail rather than return
    it as its own committable, which the driver would commit while its records are aborted."""
    bootstrap, topic, config, _ = setting
    tid = setting.naming.transactional_id(0, 0)
    attempt_a = _RivalStartsAfterFlush(config, topic, [tid], 30.0)

    def rival() -> Producer:
        producer = Producer({**config, "transactional.id": tid})
        producer.init_transactions(30)
        producer.begin_transaction()
        for value in task_input("b", 4)["value"].to_pylist():
            producer.produce(topic, value=value.encode())
        assert producer.flush(30) == 0
        return producer

    attempt_a.rival = rival
    with pytest.raises(DeliveryFailed) as fenced:
        attempt_a.write_and_pre_commit(BATCH_ID, [task_input("a", 6)])
    now = describe(admin, tid)
    message = str(fenced.value)
    assert f"transaction {tid} was fenced after its flush" in message
    assert f"open transaction is producer id {now.producer_id}, epoch {now.epoch}" in message

    # The rival's transaction is untouched by A's failure and commits alone.
    assert now.state == TxnState.ONGOING
    committable_b = Committable(tid, now.producer_id, now.epoch, 4, now.partitions)
    committer.commit(committable_b)
    wait_until_committed(admin, committable_b)
    b_values = Counter(task_input("b", 4)["value"].to_pylist())
    assert values(bootstrap, topic, "read_committed") == b_values
    assert values(bootstrap, topic, "read_uncommitted") == b_values + Counter(
        task_input("a", 6)["value"].to_pylist()
    )
    # Let the rival's threads end with the test: close() would abort a transaction that its
    # commit fenced, and the caught error's traceback keeps this frame, and so the writer, alive.
    attempt_a.rival_producer = None
