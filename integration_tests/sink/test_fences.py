"""Every abort of the sink and its commands is a fence: no producer survives it.

Under transactions V1 (3.x, and 4.x below ``transaction.version`` 2) an EndTxn(abort) ends a
transaction at its producer's own epoch, and a producer that is still alive goes on unaware:
- its queued records are appended after the abort marker; on a broker without KIP-890's
  partition verification (before 3.6, or ``-nv``) no coordinator knows that transaction, the
  partition's last stable offset stays pinned, and the replay's COMMIT marker (same producer
  id, next epoch) makes the strays visible beside the replay's records: duplicates;
- its next AddPartitionsToTxn begins a new transaction at the same epoch; the task then
  pre-commits it and the driver commits it, while everything it wrote before is gone.

Each test here failed on the sink that aborted with EndTxn (seen on 3.5.2 and 3.9.2-nv), and
passes now that every abort bumps the epoch (:mod:`connectors.kafka.fence`). 4.4.0 runs them
as a control: transactions V2 moves the epoch at every EndTxn, so they held there before too.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pytest
from click.testing import CliRunner
from confluent_kafka import KafkaException, Producer

from checkpoint.deadline import Deadline
from checkpoint.model import Committable
from connectors.kafka.end_txn import EndTxnTarget
from connectors.kafka.sink.committer import KafkaCommitter
from connectors.kafka.sink.errors import CommitUndeterminedError
from connectors.kafka.sink.exactly_once_writer import ExactlyOnceWriter
from connectors.kafka.sink.naming import TransactionalIdNaming
from connectors.kafka.sink.writer import DeliveryFailed
from connectors.kafka.transactions import TransactionAdmin
from connectors.kafka.txn_state import TxnState
from integration_tests.conftest import create_topic
from integration_tests.sink.conftest import on_kafka
from integration_tests.sink.transactions import (
    commit_visibly,
    describe,
    stable_and_end,
    values,
    wait_until_ended,
)
from kafka_eos.cluster import KafkaCluster
from kafka_eos.commands.txn import command as txn_command

pytestmark = pytest.mark.kafka

OWNER = "fe7ce000"
# Brokers on which an abort at the producer's epoch leaves it free to write (no partition
# verification, transactions V1), and 4.4.0 (V2) as the control.
WITHOUT_VERIFICATION = on_kafka("3.5.2", "3.9.2-nv", "4.4.0")


def rows(prefix: str, count: int, partition: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "value": [f"{prefix}-{i}" for i in range(count)],
            "partition": pa.array([partition] * count, pa.int32()),
        }
    )


def written(*batches: pa.RecordBatch) -> Counter[str]:
    return Counter(v for batch in batches for v in batch["value"].to_pylist())


class Setting:
    def __init__(self, cluster: KafkaCluster) -> None:
        self.bootstrap = cluster.bootstrap_servers
        self.topic = create_topic(self.bootstrap, partitions=2)
        self.config: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap,
            "transaction.timeout.ms": "60000",
        }
        self.naming = TransactionalIdNaming(f"fence-{uuid.uuid4().hex[:8]}", OWNER)

    def writer(self, attempt: int = 0) -> ExactlyOnceWriter:
        return ExactlyOnceWriter(self.config, self.topic, self.naming.slots(0, attempt, 0), 30.0)

    def open_transaction(self, tid: str, prefix: str, count: int) -> Producer:
        """A producer of ``tid`` with ``count`` records of partition 0 flushed into an open
        transaction; it lives on, as a worker the driver gave up on does."""
        producer = Producer({**self.config, "transactional.id": tid})
        producer.init_transactions(30)
        producer.begin_transaction()
        for i in range(count):
            producer.produce(self.topic, value=f"{prefix}-{i}".encode(), partition=0)
        assert producer.flush(30) == 0
        return producer

    def committer(self) -> KafkaCommitter:
        return KafkaCommitter(self.config, self.naming, timeout_s=30)

    def assert_no_hanging_transaction(self) -> None:
        for partition in (0, 1):
            stable, end = stable_and_end(self.bootstrap, self.topic, partition)
            assert stable == end, (
                f"{self.topic}-{partition}: last stable offset {stable} below the end {end}: a "
                "transaction is open on the partition, and no coordinator tracks it"
            )


@pytest.fixture
def setting(versioned_kafka: KafkaCluster) -> Setting:
    return Setting(versioned_kafka)


@WITHOUT_VERIFICATION
def test_the_driver_fences_an_aborted_attempt_that_writes_on_and_the_replay_commits_alone(
    setting: Setting, admin: TransactionAdmin
) -> None:
    """Finding 1. A task attempt wrote batch 1's records on slot 0, and its worker still lives
    with more records queued when Spark aborts the batch (another task ran out of retries, or
    ``query.stop()``): the driver's abort must fence it, so that those records are refused.
    The replay then takes slot 0 again (its transaction ended) and commits only its own."""
    tid = setting.naming.transactional_id(0, 0)
    attempt = setting.open_transaction(tid, "first", 5)
    now = describe(admin, tid)
    committer = setting.committer()
    try:
        # Spark's abort(messages, 1): the attempt's committable, as its task returned it.
        committer.abort(
            Committable(tid, now.producer_id, now.epoch, 5, now.partitions, now.start_time_ms)
        )
        # The worker lives on: its queued records go out after the abort (fenced: refused).
        wait_until_ended(admin, tid)
        with contextlib.suppress(KafkaException):
            for i in range(5):
                attempt.produce(setting.topic, value=f"stray-{i}".encode(), partition=0)
            attempt.flush(15)
        replay_rows = rows("replay", 3, 0)
        replay = setting.writer().write_and_pre_commit(1, [replay_rows])
        assert replay.transactional_id == tid, "the replay took slot 0: its transaction ended"
        committer.verify(1, [replay])
        commit_visibly(committer, replay)
    finally:
        committer.close()
    assert values(setting.bootstrap, setting.topic, "read_committed") == written(replay_rows)
    seen = values(setting.bootstrap, setting.topic, "read_uncommitted")
    assert not [v for v in seen if v.startswith("stray-")], "the fenced producer wrote on"
    setting.assert_no_hanging_transaction()


def _abort_between(
    admin: TransactionAdmin,
    first: pa.RecordBatch,
    abort: Callable[[], None],
    second: pa.RecordBatch,
) -> Callable[[ExactlyOnceWriter], Iterator[pa.RecordBatch]]:
    """A task's input: ``first``, then, once it is in the log (its partition added to the
    transaction), something outside the task ends its transaction, then ``second``."""

    def batches(writer: ExactlyOnceWriter) -> Iterator[pa.RecordBatch]:
        yield first
        assert writer._producer is not None and writer._producer.flush(30) == 0
        abort()
        wait_until_ended(admin, writer.transactional_id)
        yield second

    return batches


@on_kafka("3.5.2", "3.9.2-nv", "3.9.2", "4.4.0")
def test_txn_abort_of_a_running_task_fences_it_so_nothing_of_its_transaction_commits(
    setting: Setting, admin: TransactionAdmin
) -> None:
    """Finding 2. ``kafka-eos txn abort --transactional-id ... --yes`` ends a running task's
    transaction after it wrote partition 0; the task goes on to partition 1. With an abort at
    the producer's own epoch, the task's AddPartitionsToTxn began a new transaction at that
    epoch, which pre-committed, verified and committed: partition 1 visible, partition 0 gone.
    The fence leaves the producer nothing to write with: the task fails, nothing is visible."""
    writer = setting.writer()
    tid = writer._candidates[0]
    before, after = rows("before", 4, 0), rows("after", 3, 1)

    def operator_aborts() -> None:
        runner = CliRunner()
        result = runner.invoke(
            txn_command,
            ["abort", "--bootstrap-servers", setting.bootstrap, "--transactional-id", tid, "--yes"],
        )
        assert result.exit_code == 0, result.output

    with pytest.raises(DeliveryFailed, match=r"(?i)fenced"):
        writer.write_and_pre_commit(
            1, _abort_between(admin, before, operator_aborts, after)(writer)
        )
    assert values(setting.bootstrap, setting.topic, "read_committed") == Counter()
    now = describe(admin, tid)
    assert now.state not in (TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT)
    setting.assert_no_hanging_transaction()


@on_kafka("3.5.2", "3.9.2-nv", "3.9.2")
def test_a_transaction_begun_again_at_its_epoch_is_refused_at_the_pre_commit(
    setting: Setting, admin: TransactionAdmin
) -> None:
    """Finding 2, when the abort is not a fence (a release before fences, another tool): an
    EndTxn(abort) at the producer's own epoch ends the task's transaction after partition 0,
    and partition 1 begins another at the same epoch. The pre-commit must see that the
    transaction it describes lacks a partition this producer wrote to, and fail, rather than
    hand the driver a committable whose first records are gone."""
    writer = setting.writer()
    tid = writer._candidates[0]
    before, after = rows("before", 4, 0), rows("after", 3, 1)

    def abort_at_its_epoch() -> None:
        now = describe(admin, tid)
        target = EndTxnTarget(tid, now.producer_id, now.epoch)
        admin.end_transactions([target], commit=False, deadline=Deadline(30))

    with pytest.raises(DeliveryFailed, match=r"without \[\('.*', 0\)\] that this producer wrote"):
        writer.write_and_pre_commit(
            1, _abort_between(admin, before, abort_at_its_epoch, after)(writer)
        )
    assert values(setting.bootstrap, setting.topic, "read_committed") == Counter()
    # The task leaves the second transaction to the driver, whose fence ends it.
    now = describe(admin, tid)
    assert now.state == TxnState.ONGOING
    admin.fence_transactions([EndTxnTarget(tid, now.producer_id, now.epoch)], deadline=Deadline(30))
    assert describe(admin, tid).state == TxnState.COMPLETE_ABORT
    assert values(setting.bootstrap, setting.topic, "read_committed") == Counter()


def _txn(*args: str) -> Any:
    return CliRunner().invoke(txn_command, list(args))


@on_kafka("3.5.2", "3.9.2-nv")
def test_find_hanging_finds_a_transaction_no_coordinator_tracks_and_aborts_it(
    setting: Setting, admin: TransactionAdmin
) -> None:
    """Finding 5. A producer that wrote on after an abort at its own epoch (what aborts did
    before fences, and what other tools still do) left records on partition 0 in a
    transaction no coordinator knows: the last stable offset stays below them for good, and
    ``txn list`` cannot see it. ``txn find-hanging`` finds it on the partition and, with
    ``--abort``, ends it with an abort marker, as ``kafka-transactions.sh abort`` does."""
    tid = f"{setting.naming.prefix}-other-tool"
    producer = setting.open_transaction(tid, "aborted", 3)
    now = describe(admin, tid)
    ended = admin.end_transactions(
        [EndTxnTarget(tid, now.producer_id, now.epoch)], commit=False, deadline=Deadline(30)
    )
    assert ended[tid].error is None, ended[tid]
    wait_until_ended(admin, tid)
    for i in range(2):
        producer.produce(setting.topic, value=f"hanging-{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    stable, end = stable_and_end(setting.bootstrap, setting.topic, 0)
    assert (stable, end) == (4, 6), "3 records, the abort marker at 3, then 2 hanging records"
    cluster = ("--bootstrap-servers", setting.bootstrap)
    listed = _txn("list", *cluster, "--json")
    assert listed.exit_code == 0 and json.loads(listed.stdout)["transactions"] == []

    found = _txn("find-hanging", *cluster, "--topic", setting.topic, "--older-than", "0s", "--json")
    assert found.exit_code == 1, found.output
    [hanging] = json.loads(found.stdout)["hanging"]
    assert (hanging["topic"], hanging["partition"], hanging["start_offset"]) == (
        setting.topic,
        0,
        4,
    )
    assert (hanging["producer_id"], hanging["transactional_id"]) == (now.producer_id, tid)
    assert hanging["coordinator_state"] == TxnState.COMPLETE_ABORT.value
    # By default only transactions older than the brokers' transaction.max.timeout.ms count.
    young = _txn("find-hanging", *cluster, "--topic", setting.topic)
    assert young.exit_code == 0 and "no hanging transaction on 2 partition(s)" in young.stdout

    aborted = _txn(
        "find-hanging", *cluster, "--topic", setting.topic, "--older-than", "0s", "--abort",
        "--yes", "--json",
    )  # fmt: skip
    assert aborted.exit_code == 0, aborted.output
    assert [h["aborted"] for h in json.loads(aborted.stdout)["hanging"]] == [True]
    setting.assert_no_hanging_transaction()
    assert values(setting.bootstrap, setting.topic, "read_committed") == Counter()
    again = _txn("find-hanging", *cluster, "--topic", setting.topic, "--older-than", "0s")
    assert again.exit_code == 0, again.output


def test_a_zombie_of_a_resubmitted_stage_starts_apart_and_never_fences_the_new_attempt(
    setting: Setting, admin: TransactionAdmin
) -> None:
    """Finding 3. After a FetchFailed, a zombie of the old stage attempt and the new stage
    attempt's task are both attempt 0. The zombie described its slot (free) and has not yet
    initialized its producer when the new attempt runs whole and is verified. When both
    started at the slot of attempt 0, the zombie's init_transactions then aborted the verified
    transaction (a loud loss after the decision). Their task attempt ids start them apart."""
    config, topic = setting.config, setting.topic
    zombie = ExactlyOnceWriter(config, topic, setting.naming.slots(0, 0, 17), 30.0)
    new = ExactlyOnceWriter(config, topic, setting.naming.slots(0, 0, 42), 30.0)
    committer = setting.committer()
    verified: list[Committable] = []
    described = zombie._producer_on_a_free_id

    def the_new_attempt_runs_meanwhile(topic: str) -> tuple[Producer, str]:
        chosen = described(topic)
        verified.append(new.write_and_pre_commit(1, [rows("new", 4, 0)]))
        committer.verify(1, verified)
        return chosen

    zombie._producer_on_a_free_id = the_new_attempt_runs_meanwhile  # type: ignore[method-assign]
    try:
        late = zombie.write_and_pre_commit(1, [rows("zombie", 2, 1)])
        assert late.transactional_id != verified[0].transactional_id
        committer.verify(1, verified)  # still the open transaction the new attempt left
        committer.abort_lingering(verified)  # the driver's sweep fences the zombie's
        commit_visibly(committer, verified[0])
    finally:
        committer.close()
    assert values(setting.bootstrap, setting.topic, "read_committed") == written(rows("new", 4, 0))
    assert describe(admin, late.transactional_id).state != TxnState.ONGOING


@on_kafka("3.9.2", "4.4.0")
def test_a_late_attempt_after_the_commit_leaves_the_outcome_undetermined_never_lost(
    setting: Setting, admin: TransactionAdmin
) -> None:
    """Finding 4. The driver committed a decided transaction and died before confirming the
    batch; meanwhile a late attempt of its task took the same id and ended its own
    transaction (CompleteAbort at a higher epoch). The restart's re-driven commit is refused,
    and the coordinator shows only the later transaction. That used to be reported as a loss
    ("will never be visible"), and the runbook had the operator re-process records that were
    committed. It is undetermined: the sink stops and says the records may be visible."""
    decided_rows = rows("decided", 3, 0)
    decided = setting.writer().write_and_pre_commit(1, [decided_rows])
    committer = setting.committer()
    try:
        committer.commit(decided)
        late = Producer({**setting.config, "transactional.id": decided.transactional_id})
        late.init_transactions(30)
        late.begin_transaction()
        late.produce(setting.topic, value=b"late", partition=1)
        assert late.flush(30) == 0
        late.abort_transaction(30)
        with pytest.raises(CommitUndeterminedError, match="Its records may be visible"):
            committer.commit(decided)  # the restart's recovery re-drives the decision
    finally:
        committer.close()
    assert values(setting.bootstrap, setting.topic, "read_committed") == written(decided_rows)
