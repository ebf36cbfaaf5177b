"""A zombie attempt of a task is fenced, and its pre-commit can never be committed.

Spark retries a task whose result got lost after its pre-commit: attempt A's producer may
still be alive (a zombie) when attempt B opens the same transactional id. B's
``init_transactions`` must fence A and abort A's transaction; the driver must then refuse A's
committable, before the decision (PreCommitLostError) and after it (TransactionLostError), and
commit exactly B's records.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import pyarrow as pa
import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from checkpoint.model import Committable
from connectors.kafka.committer import KafkaCommitter
from connectors.kafka.errors import PreCommitLostError, TransactionLostError
from connectors.kafka.naming import transactional_id
from connectors.kafka.transactions import TransactionAdmin, TxnState
from connectors.kafka.writer import DeliveryFailed, ExactlyOnceWriter
from integration_tests.conftest import create_topic
from integration_tests.sink.transactions import describe, values, wait_until_committed
from kafka_eos.cluster import KafkaCluster

pytestmark = pytest.mark.kafka

BATCH_ID = 4


class _KeepsProducer(ExactlyOnceWriter):
    """The real writer; the test keeps its producer alive to play the zombie attempt."""

    kept: Producer | None = None

    def _open(self) -> Producer:
        self.kept = super()._open()
        return self.kept


class _RivalStartsAfterFlush(ExactlyOnceWriter):
    """The real writer; another attempt of the same task runs between this one's flush and
    its describe, where the describe would see the other attempt's open transaction."""

    rival: Callable[[], Committable]
    rival_committable: Committable | None = None

    def _own_producer_id_and_epoch(self) -> tuple[int, int]:
        self.rival_committable = self.rival()
        return super()._own_producer_id_and_epoch()


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
    committer = KafkaCommitter(setting.config, setting.prefix, timeout_s=30)
    yield committer
    committer.close()


def test_a_new_attempt_fences_the_zombie_and_only_its_pre_commit_is_committed(
    setting: Setting,
    admin: TransactionAdmin,
    committer: KafkaCommitter,
) -> None:
    bootstrap, topic, config, prefix = setting
    tid = transactional_id(prefix, 0)
    attempt_a = _KeepsProducer(config, topic, tid, 30.0)
    committable_a = attempt_a.write_and_pre_commit(BATCH_ID, [task_input("a", 6)])
    zombie = attempt_a.kept
    assert zombie is not None

    # Attempt B of the same task: init_transactions on the same id fences A.
    committable_b = ExactlyOnceWriter(config, topic, tid, 30.0).write_and_pre_commit(
        BATCH_ID, [task_input("b", 4)]
    )
    assert committable_b.producer_id == committable_a.producer_id
    assert committable_b.epoch > committable_a.epoch
    now = describe(admin, tid)
    assert (now.state, now.epoch) == (TxnState.ONGOING, committable_b.epoch)  # B's, not A's

    # The zombie's next write is refused by the broker: it was fenced, fatally.
    with pytest.raises(KafkaException) as fenced:
        zombie.produce(topic, value=b"zombie-write")
        zombie.flush(30)
    assert fenced.value.args[0].code() == KafkaError._FENCED
    assert fenced.value.args[0].fatal()
    with pytest.raises(KafkaException) as fenced_commit:
        zombie.commit_transaction(30)
    assert fenced_commit.value.args[0].code() == KafkaError._FENCED

    # Before the decision: A's pre-commit is gone, so the batch must not be decided with it.
    with pytest.raises(PreCommitLostError) as lost:
        committer.verify_pre_committed(BATCH_ID, [committable_a])
    message = str(lost.value)
    assert f"batch {BATCH_ID}: pre-committed transaction {tid} is gone" in message
    assert f"epoch {committable_a.epoch}, found Ongoing" in message
    assert f"epoch {committable_b.epoch})" in message
    committer.verify_pre_committed(BATCH_ID, [committable_b])

    committer.commit(committable_b)
    wait_until_committed(admin, committable_b)
    b_values = Counter(task_input("b", 4)["value"].to_pylist())
    assert values(bootstrap, topic, "read_committed") == b_values

    # After the decision: A's transaction can never be committed, and that is never silent.
    with pytest.raises(TransactionLostError) as never:
        committer.commit(committable_a)
    error = never.value
    assert (error.transactional_id, error.producer_id, error.epoch) == committable_a.key
    assert "EndTxn(commit) answered ProducerFencedError" in error.detail
    assert "CompleteCommit" in error.detail  # B's commit, not A's

    # A's records were written (read_uncommitted sees them) but stay invisible, and the
    # zombie's refused write never reached the log.
    a_values = Counter(task_input("a", 6)["value"].to_pylist())
    assert values(bootstrap, topic, "read_uncommitted") == a_values + b_values
    assert values(bootstrap, topic, "read_committed") == b_values


def test_an_aborted_pre_commit_is_not_taken_for_the_next_commit_of_its_id(
    setting: Setting,
    admin: TransactionAdmin,
    committer: KafkaCommitter,
) -> None:
    """The driver aborts A's transaction (EndTxn abort, as recovery does), then the id's next
    transaction B commits. Committing A afterwards must fail: its records are lost."""
    bootstrap, topic, config, prefix = setting
    tid = transactional_id(prefix, 0)
    committable_a = ExactlyOnceWriter(config, topic, tid, 30.0).write_and_pre_commit(
        BATCH_ID, [task_input("a", 3)]
    )
    committer.abort(committable_a)
    committable_b = ExactlyOnceWriter(config, topic, tid, 30.0).write_and_pre_commit(
        BATCH_ID + 1, [task_input("b", 2)]
    )
    committer.commit(committable_b)
    wait_until_committed(admin, committable_b)

    with pytest.raises(TransactionLostError):
        committer.commit(committable_a)
    assert values(bootstrap, topic, "read_committed") == Counter(
        task_input("b", 2)["value"].to_pylist()
    )


def test_an_attempt_fenced_after_its_flush_never_names_the_rivals_transaction(
    setting: Setting,
    admin: TransactionAdmin,
    committer: KafkaCommitter,
) -> None:
    """Two attempts of one task overlap (speculative execution): B fences A right after A's
    flush. A's describe then sees B's open, possibly half-written transaction; A must fail
    rather than return it as its own committable, which the driver would commit while A's
    records are aborted."""
    bootstrap, topic, config, prefix = setting
    tid = transactional_id(prefix, 0)
    attempt_a = _RivalStartsAfterFlush(config, topic, tid, 30.0)
    attempt_a.rival = lambda: ExactlyOnceWriter(config, topic, tid, 30.0).write_and_pre_commit(
        BATCH_ID, [task_input("b", 4)]
    )

    with pytest.raises(DeliveryFailed) as fenced:
        attempt_a.write_and_pre_commit(BATCH_ID, [task_input("a", 6)])
    committable_b = attempt_a.rival_committable
    assert committable_b is not None
    message = str(fenced.value)
    assert f"transaction {tid} was fenced after its flush" in message
    assert f"open transaction is producer id {committable_b.producer_id}, epoch " in message
    assert "spark.speculation=false" in message

    # B's transaction is untouched by A's failure and commits alone.
    now = describe(admin, tid)
    assert (now.state, now.epoch) == (TxnState.ONGOING, committable_b.epoch)
    committer.commit(committable_b)
    wait_until_committed(admin, committable_b)
    b_values = Counter(task_input("b", 4)["value"].to_pylist())
    assert values(bootstrap, topic, "read_committed") == b_values
    assert values(bootstrap, topic, "read_uncommitted") == b_values + Counter(
        task_input("a", 6)["value"].to_pylist()
    )
