"""Failures beyond the kill -9 matrix: task retries with a zombie attempt, transactions the
broker times out, a parallelism change, an executor crash, and a multi-process Spark cluster
(brokers killed: test_broker_kills.py).

Each case ends with a read_committed drain holding every number exactly once (or with a loud
error when the guarantee cannot hold), and read_uncommitted evidence that the failure struck
after records were written.
"""

from __future__ import annotations

import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from connectors.kafka.sink.lifetime import commit_margin_ms, remaining_ms
from connectors.kafka.txn_state import TxnState
from integration_tests.sink.conftest import default_version_only
from integration_tests.sink.harness import (
    ALL,
    BATCH_0,
    BATCH_1,
    KILLED,
    Pipeline,
    assert_exactly_once,
    assert_ran,
)

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

# What one of batch 1's two tasks writes: the test source gives task i the numbers i, i + 2, ...
ONE_TASK_OF_BATCH_1 = (Counter(range(100, 200, 2)), Counter(range(101, 200, 2)))

# Timing assumptions small enough that a 12 s transaction timeout passes the startup checks
# (EOS002: the timeout must cover twice trigger interval + batch duration + restart time).
# Not 6 s: batch 0 must reach its decision within the timeout less the commit margin (a
# quarter), and on a loaded CI host its transactions were 5.1 s old at the verify, over 4.5.
SHORT_TIMEOUT = {
    "kafka.transaction.timeout.ms": "12000",
    "kafka.message.timeout.ms": "5000",
    "triggerInterval": "1s",
    "maxBatchDuration": "1s",
    "maxRestartTime": "1s",
}


def test_task_failure_after_pre_commit_is_retried_and_the_dead_attempts_transaction_aborted(
    pipeline: Pipeline,
) -> None:
    """The first task of batch 1 to pre-commit fails right after, leaving its transaction
    open (the attempt's producer neither commits nor aborts). The retry takes another id of
    its task (the failed attempt's is held open), and the driver aborts the dead attempt's
    transaction before deciding the batch."""
    pipeline.master = "local[2,4]"  # up to 4 attempts per task
    assert_ran(pipeline.run("task.after_pre_commit@1#1:raise"))

    assert_exactly_once(pipeline)
    # The failed attempt wrote its task's 50 numbers of batch 1 once more, left invisible.
    assert pipeline.uncommitted() - ALL in ONE_TASK_OF_BATCH_1
    assert pipeline.spark_committed_batches() == {0, 1, 2}


@default_version_only
def test_transaction_timed_out_before_the_decision_fails_the_batch_loudly(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    """The driver is held after every pre-commit until the broker aborted the transactions on
    their timeout. Deciding would lose batch 1, so the batch fails, and a restart replays it.
    On one version: V1 and V2 coordinators both bump the epoch of a timed-out transaction, and
    the verify refuses it by its state alone; after the decision, where the commit oracle
    differs, the timeout runs on both."""
    go = tmp_path / "go"
    crash_at = f"driver.before_decision@1:stall-until={go}"
    with pipeline.started(crash_at, options=SHORT_TIMEOUT) as job:
        pipeline.wait_until_struck(job, crash_at)
        assert pipeline.store().checkpoint_ids() == [0]  # the window: batch 1 undecided
        deadline = time.monotonic() + 60
        while pipeline.open_transactions():  # the broker's clock, however slow this machine
            assert time.monotonic() < deadline, "the broker did not abort batch 1's transactions"
            time.sleep(0.5)
        go.touch()
        stdout, stderr = job.communicate(timeout=300)
    result = subprocess.CompletedProcess(job.args, job.returncode, stdout, stderr)
    assert_ran(result, 1)
    assert "PreCommitLostError" in result.stderr
    assert "batch 1" in result.stderr and "transaction.timeout.ms" in result.stderr
    assert pipeline.store().checkpoint_ids() == [0]  # never decided
    assert pipeline.committed() == BATCH_0

    assert_ran(pipeline.run())
    assert_exactly_once(pipeline)
    assert pipeline.uncommitted() == ALL + BATCH_1  # the timed-out copy of batch 1 is aborted


@default_version_only
def test_a_transaction_too_close_to_its_timeout_is_never_decided(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    """The driver is slow between its sweep of lingering transactions and the decision (a
    long sweep, a slow store): the pre-committed transactions of batch 1 near their 12 s
    timeout. Verifying before the sweep, as the sink once did, decided them anyway, and the
    broker aborted them before EndTxn: a decided batch lost. Verification is now the last
    step before the decision and demands the commit margin (3 s of a 12 s timeout), so the
    batch fails undecided and its replay commits it once.

    The driver is held after the sweep until the broker's clock leaves each transaction less
    than the commit margin, however slow this machine is."""
    go = tmp_path / "go"
    crash_at = f"driver.before_verify@1:stall-until={go}"
    with pipeline.started(crash_at, options=SHORT_TIMEOUT) as job:
        pipeline.wait_until_struck(job, crash_at)
        # The window: batch 1 pre-committed and swept, not decided, its transactions open.
        assert pipeline.store().checkpoint_ids() == [0]
        tids = pipeline.open_transactions()
        assert len(tids) == 2, tids
        assert pipeline.transaction_states(tids) == dict.fromkeys(tids, TxnState.ONGOING)
        # commitTimeoutMs is left at its default, 60 s: the margin is a quarter of 12 s.
        margin_ms = commit_margin_ms(int(SHORT_TIMEOUT["kafka.transaction.timeout.ms"]), 60_000)
        deadline = time.monotonic() + 60
        while True:
            now_ms = int(time.time() * 1000)
            left_ms = {
                tid: remaining_ms(d.start_time_ms, d.timeout_ms, now_ms)
                for tid, d in pipeline.transactions(tids).items()
                if d is not None
            }
            if len(left_ms) == 2 and max(left_ms.values()) < margin_ms:
                break
            assert time.monotonic() < deadline, f"batch 1 never neared its timeout: {left_ms}"
            time.sleep(0.2)
        go.touch()
        stdout, stderr = job.communicate(timeout=300)
    result = subprocess.CompletedProcess(job.args, job.returncode, stdout, stderr)
    assert_ran(result, 1)
    assert "PreCommitLostError" in result.stderr and "batch 1" in result.stderr
    # Refused for its margin; or, if the broker's abort came first, for that abort.
    assert any(why in result.stderr for why in ("commit margin", "CompleteAbort", "PrepareAbort"))
    assert 1 not in pipeline.store().checkpoint_ids()  # never decided
    assert pipeline.committed() == BATCH_0  # batch 0 only

    assert_ran(pipeline.run())
    assert_exactly_once(pipeline)


@default_version_only
def test_a_decided_batch_id_planned_anew_stops_loudly(pipeline: Pipeline) -> None:
    """Batch 1 is decided and committed, then the driver dies before Spark records it as
    done. An operator deletes offsets/1, so Spark plans batch 1 anew. Its tasks trust the
    decision and write nothing: recording the new plan as done would lose its input. The
    decision holds the fingerprint of the old offsets/1, so the restart stops, naming it."""
    assert_ran(pipeline.run("driver.after_commit@1"), KILLED)
    assert pipeline.store().is_confirmed(1) and pipeline.spark_committed_batches() == {0}
    pipeline.delete_planned_batch(1)
    assert pipeline.spark_planned_batches() == {0}, "offsets/1 is still there"

    result = pipeline.run()
    assert_ran(result, 1)
    assert "ReusedCheckpointId" in result.stderr, result.stderr[-3000:]
    assert "offsets/1 was deleted or replaced" in result.stderr
    assert 1 not in pipeline.spark_committed_batches()
    assert pipeline.committed() == BATCH_0 + BATCH_1  # batches 0 and 1, once each


# On one version: what differs between the protocols here, whether the oracle takes a transaction
# the broker aborted at its timeout for committed, test_transaction_version_1.py checks on V1
# without a Spark job.
@default_version_only
def test_decided_transaction_lost_to_its_timeout_stops_with_the_batch_named(
    pipeline: Pipeline,
) -> None:
    """Killed after the decision of batch 1, restarted after the broker aborted its
    transactions: the decided output can no longer be committed. That is a loss the sink
    cannot repair, so the restart must stop, naming the batch, the transactions and the fix."""
    # 15 s, more than SHORT_TIMEOUT's 12: batch 1 must get to its decision (within the
    # timeout less the margin, 11.25 s of 15) on a loaded machine; the abort is only waited for.
    options = {**SHORT_TIMEOUT, "kafka.transaction.timeout.ms": "15000"}
    assert_ran(pipeline.run("driver.before_end_txn@1#1", options=options), KILLED)
    assert pipeline.store().checkpoint_ids() == [0, 1] and not pipeline.store().is_confirmed(1)
    assert pipeline.committed() == BATCH_0
    tids = pipeline.decided_transactional_ids(1)
    assert len(tids) == 2, tids
    aborted = dict.fromkeys(tids, TxnState.COMPLETE_ABORT)
    deadline = time.monotonic() + 60
    while (states := pipeline.transaction_states(tids)) != aborted:
        assert time.monotonic() < deadline, f"the broker did not abort the txns: {states}"
        time.sleep(1)

    result = pipeline.run()
    assert_ran(result, 1)
    assert "TransactionLostError" in result.stderr
    for needle in ("batch 1", *tids, "transaction.timeout.ms"):
        assert needle in result.stderr, f"the error does not name {needle!r}"
    assert pipeline.committed() == BATCH_0  # batch 1 lost, and said so
    assert pipeline.uncommitted() == BATCH_0 + BATCH_1


@default_version_only
def test_stop_mid_batch_leaves_no_open_transaction(pipeline: Pipeline, tmp_path: Path) -> None:
    """``query.stop()`` while batch 1's tasks hold their pre-committed transactions: Spark
    cancels the job and calls ``abort``, which aborts every open transaction of the query that
    no decision names, including those of attempts that never reported back. Left open they
    would hold back every read_committed reader of the output until their timeout (15 min)."""
    stop = tmp_path / "stop"
    with pipeline.started("task.after_pre_commit@1:stall=120", stop_when=stop) as job:
        deadline = time.monotonic() + 180
        # Batch 0 is committed (its transactions closed), and batch 1's tasks pre-committed.
        while pipeline.store().checkpoint_ids() != [0] or len(pipeline.open_transactions()) < 2:
            assert job.poll() is None and time.monotonic() < deadline, "batch 1 not pre-committed"
            time.sleep(0.5)
        assert pipeline.store().is_confirmed(0)
        stop.touch()
        _, stderr = job.communicate(timeout=120)
    assert job.returncode == 0, stderr[-4000:]
    assert pipeline.open_transactions() == [], "the stopped batch's transactions are still open"
    assert pipeline.committed() == BATCH_0
    assert pipeline.uncommitted() == BATCH_0 + BATCH_1  # batch 1 was written, and aborted

    assert_ran(pipeline.run())
    assert_exactly_once(pipeline)


# On one version: what differs between the protocols here, the fence of a dead attempt's
# transaction, is the fault matrix's (a) and (b) on both; finding ids by prefix does not differ.
@default_version_only
def test_parallelism_change_after_a_crash_aborts_ids_beyond_the_new_task_count(
    pipeline: Pipeline,
) -> None:
    """Three tasks pre-commit batch 1 and the driver dies; the query comes back with one
    task. Recovery finds the lingering transactions of ids 1 and 2 by prefix."""
    assert_ran(pipeline.run("driver.before_decision@1", partitions=3), KILLED)
    assert pipeline.store().checkpoint_ids() == [0]
    tids = pipeline.open_transactions()
    assert len(tids) == 3, tids
    assert pipeline.transaction_states(tids) == dict.fromkeys(tids, TxnState.ONGOING)
    assert pipeline.uncommitted() == BATCH_0 + BATCH_1

    assert_ran(pipeline.run(partitions=1))
    assert_exactly_once(pipeline)
    assert pipeline.uncommitted() == ALL + BATCH_1


# On one version: the dead executor's producer is gone, as the killed job's is in the fault
# matrix's (a), which fences its transaction on both protocols.
@default_version_only
def test_executor_killed_after_its_tasks_pre_commit(pipeline: Pipeline) -> None:
    """An executor JVM is killed -9 right after one of its tasks pre-committed batch 1: its
    commit message never reaches the driver, which lives on. Spark reruns the task on another
    executor, whose init_transactions fences the dead attempt and aborts its transaction."""
    pipeline.master = "local-cluster[2,1,1024]"
    result = pipeline.run("task.after_pre_commit@1#1:kill-jvm")
    assert_ran(result)  # the driver survived: the job ran to its end
    assert "ExecutorLostFailure" in result.stderr, "no executor was lost"

    assert_exactly_once(pipeline)
    # The dead executor's task had written and flushed its 50 numbers of batch 1.
    assert pipeline.uncommitted() - ALL in ONE_TASK_OF_BATCH_1
    assert pipeline.spark_committed_batches() == {0, 1, 2}


@default_version_only
def test_multi_process_spark_cluster(pipeline: Pipeline) -> None:
    """Executors in JVMs of their own (local-cluster): committables really travel from
    executor processes to the driver. Killed after some EndTxns, then restarted. On one
    version: the fault matrix's (d) re-drives some EndTxns on both."""
    pipeline.master = "local-cluster[2,1,1024]"
    assert_ran(pipeline.run("driver.before_end_txn@1#1"), KILLED)
    assert pipeline.store().checkpoint_ids() == [0, 1] and not pipeline.store().is_confirmed(1)
    assert pipeline.committed() == BATCH_0
    first, second = pipeline.decided_transactional_ids(1)
    pipeline.commit_first_decided(1)  # its EndTxn reached the coordinator before the kill
    assert pipeline.transaction_states([first, second]) == {
        first: TxnState.COMPLETE_COMMIT,
        second: TxnState.ONGOING,
    }

    assert_ran(pipeline.run())
    assert_exactly_once(pipeline)
    assert pipeline.uncommitted() == ALL
