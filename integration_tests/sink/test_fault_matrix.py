"""Kill -9 the query at every phase of the two-phase commit, restart it, count the output.

End to end: the numbers 0..299 are in a Kafka topic, read by the kafka-eos source (100 a
batch), written by the kafka-eos sink. Each case: batch 0 completes, the crash hits batch 1
and kills the whole job (driver, JVM, Python workers), the restarted query replays batch 1 from
the offsets Spark logged and finishes batch 2. A read_committed drain must then hold every
number exactly once, compared key by key. The state left by the crash proves it struck
mid-protocol: read_uncommitted records of the failed attempt, compared key by key too, or
decisions and transactions caught half-way, each decided or open transaction compared id by id
with the state it must be in. (f) crashes the two points that other tests only stall at, one
restart after the other; (g) crashes again in the restart's recovery of a decided batch, and
is (d) on the default version, whose (c) has its checkpoint on S3.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from connectors.kafka.txn_state import TxnState
from integration_tests.sink.conftest import default_version_only, on_kafka
from integration_tests.sink.harness import (
    ALL,
    BATCH_0,
    BATCH_1,
    KILLED,
    Pipeline,
    assert_exactly_once,
    assert_ran,
    fed_pipeline,
)
from kafka_eos.cluster import DEFAULT_KAFKA_VERSION, SUPPORTED_KAFKA_VERSIONS, KafkaCluster
from kafka_eos.cluster.base import PROTOCOL_KAFKA_VERSIONS

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

# (b) to (d) run on each transactions protocol. (a) runs on the default version only: its restart
# fences what the crash left open and undecided, the path (b) takes on every label, and (a)'s own
# step, records of an attempt that never pre-committed, is the same to the broker on V1 and V2.
# (e) finds its decision confirmed and touches no transaction: the default version only. A
# cluster upgraded to 4.x that has not finalized V2 runs V1's protocol on 4.x's code, where the
# committer must send EndTxn v4 though the broker offers v5: the newest release at
# transaction.version 1 runs (b), the fence of what a crash left undecided. The re-driven and
# the already committed EndTxn of (d) and (e) are the committer's steps there, not Spark's:
# test_transaction_version_1.py runs them against that cluster without a Spark job ((d) runs on
# 3.9.2's V1 and on V2).
TRANSACTIONS_V1_ON_4X = f"{DEFAULT_KAFKA_VERSION}-tv1"
on_each_protocol = on_kafka(*PROTOCOL_KAFKA_VERSIONS)
# On the default version, (c) runs with its checkpoint on S3, and (d) inside (g), which crashes
# once more between (d)'s crash and its restart: the same runs, less a Spark job or two each.
# On the other, (c) carries Avro payloads.
OTHER_PROTOCOLS = [v for v in PROTOCOL_KAFKA_VERSIONS if v != DEFAULT_KAFKA_VERSION]


@pytest.fixture
def pipeline(versioned_kafka: KafkaCluster, tmp_path: Path) -> Pipeline:
    return fed_pipeline(versioned_kafka.bootstrap_servers, tmp_path / "checkpoint")


def _crash_then_recover(pipeline: Pipeline, crash_at: str) -> None:
    assert_ran(pipeline.run(crash_at), KILLED)


def _assert_open_per_task(pipeline: Pipeline, tasks: int) -> list[str]:
    """One open transaction per task of the batch, each described as ongoing: compared id by
    id, so that an id the broker no longer knows fails."""
    open_ids = pipeline.open_transactions()
    assert len(open_ids) == tasks, open_ids
    assert pipeline.transaction_states(open_ids) == dict.fromkeys(open_ids, TxnState.ONGOING)
    return open_ids


def _assert_undecided_batch_1_left_open(pipeline: Pipeline) -> None:
    """What a crash after every task of batch 1 pre-committed, before its decision, leaves."""
    assert pipeline.store().checkpoint_ids() == [0]  # batch 1 never decided
    assert pipeline.spark_committed_batches() == {0}
    assert pipeline.committed() == BATCH_0
    assert pipeline.uncommitted() == BATCH_0 + BATCH_1  # ... but every task pre-committed it
    _assert_open_per_task(pipeline, 2)


@default_version_only
def test_a_crash_in_task_before_pre_commit(pipeline: Pipeline) -> None:
    # One task of batch 1 is held once it has produced its input, before its flush; the job is
    # killed once records of both tasks (even and odd numbers) reached the log, so that the
    # replay has an aborted first copy to leave behind.
    crash_at = f"task.before_pre_commit@1#1:stall-until={pipeline.checkpoint.parent / 'never'}"
    with pipeline.started(crash_at) as job:
        pipeline.wait_until_struck(job, crash_at)
        deadline = time.monotonic() + 120
        while {n % 2 for n in pipeline.uncommitted() - BATCH_0} != {0, 1}:
            assert time.monotonic() < deadline, "batch 1's records never reached the log"
            time.sleep(0.2)
        # The window: batch 1 written, in open transactions, undecided.
        assert pipeline.store().checkpoint_ids() == [0]
        _assert_open_per_task(pipeline, 2)
        pipeline.crash(job)
    assert pipeline.spark_planned_batches() == {0, 1}
    assert pipeline.spark_committed_batches() == {0}
    assert pipeline.committed() == BATCH_0
    seen = pipeline.uncommitted()
    written_by_killed_attempt = seen - BATCH_0
    assert set(written_by_killed_attempt) <= set(BATCH_1)
    assert set(written_by_killed_attempt.values()) == {1}
    assert seen == BATCH_0 + written_by_killed_attempt

    assert_ran(pipeline.run())
    assert_exactly_once(pipeline)
    assert pipeline.uncommitted() == ALL + written_by_killed_attempt


# The smoke case on every supported release: the restart fences the dead attempt's
# pre-committed transactions (its producers could have written on under transactions V1).
@on_kafka(*SUPPORTED_KAFKA_VERSIONS, TRANSACTIONS_V1_ON_4X)
def test_b_crash_after_pre_commit_before_decision(pipeline: Pipeline) -> None:
    _crash_then_recover(pipeline, "driver.before_decision@1")
    _assert_undecided_batch_1_left_open(pipeline)

    assert_ran(pipeline.run())
    assert_exactly_once(pipeline)
    # Batch 1 written twice: the first copy aborted, the replay's committed.
    assert pipeline.uncommitted() == ALL + BATCH_1


# (c) on the other protocol's version carries Avro records, in and out: raw Avro read by the
# kafka-eos source and written as Avro by the sink (``--avro``). Avro changes the payload, not
# the protocol, so it rides on a run that is here anyway.
@on_kafka(*OTHER_PROTOCOLS)
def test_c_crash_after_decision_before_any_end_txn_with_avro_payloads(
    versioned_kafka: KafkaCluster, tmp_path: Path
) -> None:
    pipeline = fed_pipeline(versioned_kafka.bootstrap_servers, tmp_path / "checkpoint", avro=True)
    _decided_batch_recovered_at_restart(pipeline)


@pytest.fixture
def s3_pipeline(
    versioned_kafka: KafkaCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Pipeline]:
    """The fault matrix's query with its checkpoint on S3 (moto's server): Spark writes it
    through s3a://, configured by spark.hadoop.fs.s3a.*, the sink through boto3, configured
    by the AWS environment the job inherits (docs/sink.md#storage)."""
    s3_server = pytest.importorskip("s3_server", reason="needs the test extras (moto)")
    boto3 = pytest.importorskip("boto3", reason="needs the s3 extra (boto3)")
    with s3_server.s3_server() as endpoint:
        for key, value in s3_server.aws_environment(endpoint).items():
            monkeypatch.setenv(key, value)
        boto3.client("s3").create_bucket(Bucket="kafka-eos-checkpoints")
        s3a = {
            "endpoint": endpoint,
            "endpoint.region": "us-east-1",
            "path.style.access": "true",
            "access.key": "test",
            "secret.key": "test",
        }
        yield fed_pipeline(
            versioned_kafka.bootstrap_servers,
            tmp_path / "checkpoint",  # the crash points' files only
            location=f"s3a://kafka-eos-checkpoints/{tmp_path.name}",
            spark_conf={f"spark.hadoop.fs.s3a.{k}": v for k, v in s3a.items()},
        )


# Where the checkpoint lives does not depend on the transactions protocol: (c) on the default
# version.
@default_version_only
def test_c_with_the_checkpoint_on_s3(s3_pipeline: Pipeline) -> None:
    assert s3_pipeline.checkpoint_location.startswith("s3a://")
    _decided_batch_recovered_at_restart(s3_pipeline)
    assert not s3_pipeline.checkpoint.exists()  # nothing of the checkpoint went to the disk


def _decided_batch_recovered_at_restart(pipeline: Pipeline) -> None:
    """A crash after batch 1's decision, before any EndTxn: the restart commits it before the
    replay's tasks run, and the replay writes nothing."""
    _crash_then_recover(pipeline, "driver.before_end_txn@1#1")
    _assert_decided_batch_1_uncommitted(pipeline)
    assert pipeline.uncommitted() == BATCH_0 + BATCH_1  # batch 1 decided, in the log, not visible

    # The decided batch is committed when the restarted query builds its writer, before any
    # task of the replay runs: the replay's tasks are held at their start until it is visible.
    go = pipeline.checkpoint.parent / "go"
    restarted = time.monotonic()
    with pipeline.started(f"task.begin@1:stall-until={go}") as job:
        while sum(pipeline.committed().values()) < 200:  # batches 0 and 1
            assert job.poll() is None, "the restarted query ended with its tasks held"
            assert time.monotonic() - restarted < 240, "batch 1 not visible before its tasks ran"
            time.sleep(0.5)
        visible_after = time.monotonic() - restarted
        assert 1 not in pipeline.spark_committed_batches() and pipeline.store().is_confirmed(1)
        go.touch()
        _, stderr = job.communicate(timeout=300)
    assert job.returncode == 0, stderr[-4000:]
    print(f"recovery time: decided batch 1 visible {visible_after:.1f} s after the restart")
    assert_exactly_once(pipeline)
    # The replay of the decided batch 1 wrote nothing: its recorded commits were re-driven.
    assert pipeline.uncommitted() == ALL


def _assert_decided_batch_1_uncommitted(pipeline: Pipeline) -> list[str]:
    """What a crash after batch 1's decision, before any of its EndTxns, leaves: the decision,
    unconfirmed, naming one ongoing transaction per task; nothing of batch 1 visible yet."""
    store = pipeline.store()
    assert store.checkpoint_ids() == [0, 1] and not store.is_confirmed(1)
    assert pipeline.spark_committed_batches() == {0}
    tids = pipeline.decided_transactional_ids(1)
    assert len(tids) == 2, tids
    assert pipeline.transaction_states(tids) == dict.fromkeys(tids, TxnState.ONGOING)
    assert pipeline.committed() == BATCH_0
    return tids


def _first_end_txn_arrived_then_restart(pipeline: Pipeline, first: str, second: str) -> None:
    """Batch 1 decided and unconfirmed, as a driver killed among its EndTxns leaves it: the
    first committed, the second still open; the restart commits the second alone."""
    pipeline.commit_first_decided(1)
    assert not pipeline.store().is_confirmed(1)
    assert pipeline.transaction_states([first, second]) == {
        first: TxnState.COMPLETE_COMMIT,
        second: TxnState.ONGOING,
    }
    assert pipeline.uncommitted() == BATCH_0 + BATCH_1

    assert_ran(pipeline.run())
    assert_exactly_once(pipeline)


@on_kafka(*OTHER_PROTOCOLS)
def test_d_crash_after_some_end_txns(pipeline: Pipeline) -> None:
    _crash_then_recover(pipeline, "driver.before_end_txn@1#1")
    first, second = _assert_decided_batch_1_uncommitted(pipeline)
    # Its EndTxn reached the coordinator before the kill.
    _first_end_txn_arrived_then_restart(pipeline, first, second)
    assert pipeline.uncommitted() == ALL


@default_version_only
def test_e_crash_after_commit_before_spark_commit_log(pipeline: Pipeline) -> None:
    _crash_then_recover(pipeline, "driver.after_commit@1")
    store = pipeline.store()
    assert store.checkpoint_ids() == [0, 1] and store.is_confirmed(1)
    assert pipeline.spark_committed_batches() == {0}  # Spark will replay batch 1
    tids = pipeline.decided_transactional_ids(1)
    assert len(tids) == 2, tids
    assert pipeline.transaction_states(tids) == dict.fromkeys(tids, TxnState.COMPLETE_COMMIT)
    assert pipeline.committed() == BATCH_0 + BATCH_1

    assert_ran(pipeline.run())
    assert_exactly_once(pipeline)
    assert 1 in pipeline.spark_committed_batches()
    assert pipeline.uncommitted() == ALL  # the replay of batch 1 wrote nothing


# The two points that the other tests only stall at, and a crash during recovery: the protocol
# does not differ between transactions V1 and V2 there ((b) and (d) run on both; (g) is (d) on
# the default version).
@default_version_only
def test_f_crash_as_tasks_begin_then_after_the_sweep(pipeline: Pipeline) -> None:
    """Every task of batch 1 dies as it starts, before any transaction: nothing of batch 1 is
    in the log. The restart replays batch 1 and dies after the driver's recovery and lingering
    sweep, before the verify and the decision: batch 1 pre-committed and undecided, as (b)
    leaves it. The next restart aborts that copy and commits its own."""
    _crash_then_recover(pipeline, "task.begin@1")  # whichever task starts first kills the job
    assert pipeline.store().checkpoint_ids() == [0]
    assert pipeline.spark_planned_batches() == {0, 1}
    assert pipeline.spark_committed_batches() == {0}
    assert pipeline.committed() == BATCH_0
    assert pipeline.uncommitted() == BATCH_0  # no task of batch 1 wrote anything
    assert pipeline.open_transactions() == []

    _crash_then_recover(pipeline, "driver.before_verify@1")
    _assert_undecided_batch_1_left_open(pipeline)

    assert_ran(pipeline.run())
    assert_exactly_once(pipeline)
    assert pipeline.spark_committed_batches() == {0, 1, 2}
    assert pipeline.uncommitted() == ALL + BATCH_1  # the copy pre-committed by the 2nd run


@default_version_only
def test_g_second_crash_in_the_recoverys_commit(pipeline: Pipeline) -> None:
    """Killed after batch 1's decision, before its EndTxns; killed again as the restart's
    recovery re-sends them (recovery runs when the restarted query builds its writer, before
    any task: its EndTxns are the run's first), after one had reached its coordinator. The
    next restart re-sends both, one of them already committed: exactly once."""
    _crash_then_recover(pipeline, "driver.before_end_txn@1#1")
    first, second = _assert_decided_batch_1_uncommitted(pipeline)

    _crash_then_recover(pipeline, "driver.before_end_txn#1")
    assert pipeline.spark_planned_batches() == {0, 1}  # no batch after the replay began
    assert _assert_decided_batch_1_uncommitted(pipeline) == [first, second]
    # The recovery's EndTxns are sent at once: one arrived.
    _first_end_txn_arrived_then_restart(pipeline, first, second)
    assert pipeline.spark_committed_batches() == {0, 1, 2}
    assert pipeline.uncommitted() == ALL  # batch 1 committed from its decision, not rewritten
