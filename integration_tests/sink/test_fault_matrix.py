"""Kill -9 the query at every phase of the two-phase commit, restart it, count the output.

Each case: batch 0 completes, the crash hits batch 1, the restarted query finishes batches
1 and 2. A read_committed drain must then hold every number exactly once, and the state left
by the crash must prove the crash really happened mid-protocol (read_uncommitted records of
the failed attempt, or decisions and transactions caught half-way).
"""

from __future__ import annotations

import time
from collections import Counter

import pytest

from connectors.kafka.transactions import TxnState
from integration_tests.sink.harness import KILLED, Pipeline, assert_exactly_once, assert_ran

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def _crash_then_recover(pipeline: Pipeline, crash_at: str) -> None:
    assert_ran(pipeline.run(crash_at), KILLED)


def test_a_crash_in_task_before_pre_commit(pipeline: Pipeline) -> None:
    # Dies a moment after producing, so that records in flight reach the broker first.
    _crash_then_recover(pipeline, "task.before_pre_commit@1#1:kill-after=2")
    # Spark planned batch 1 and the kill hit its tasks: no decision, no completion.
    assert pipeline.spark_planned_batches() == {0, 1}
    assert pipeline.spark_committed_batches() == {0}
    assert pipeline.store().checkpoint_ids() == [0]
    assert pipeline.committed() == Counter(range(100))
    written_by_killed_attempt = pipeline.uncommitted_count() - 100
    assert written_by_killed_attempt > 0

    assert_ran(pipeline.run())
    assert_exactly_once(pipeline)
    assert pipeline.uncommitted_count() == 300 + written_by_killed_attempt


def test_b_crash_after_pre_commit_before_decision(pipeline: Pipeline) -> None:
    _crash_then_recover(pipeline, "driver.before_decision@1")
    assert pipeline.store().checkpoint_ids() == [0]  # batch 1 never decided
    assert pipeline.uncommitted_count() == 200  # ... but every task pre-committed it
    assert len(pipeline.open_transactions()) == 2  # one per task

    assert_ran(pipeline.run())
    assert_exactly_once(pipeline)
    assert pipeline.uncommitted_count() == 400  # batch 1 written twice, first copy aborted


def test_c_crash_after_decision_before_any_end_txn(pipeline: Pipeline) -> None:
    _crash_then_recover(pipeline, "driver.before_end_txn@1#1")
    store = pipeline.store()
    assert store.checkpoint_ids() == [0, 1] and not store.is_confirmed(1)
    tids = pipeline.decided_transactional_ids(1)
    assert {d.state for d in pipeline.transactions(tids).values() if d} == {TxnState.ONGOING}
    assert pipeline.committed() == Counter(range(100))
    assert pipeline.uncommitted_count() == 200  # batch 1 is in the log, decided, not committed

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
    assert pipeline.uncommitted_count() == 300


def test_d_crash_after_some_end_txns(pipeline: Pipeline) -> None:
    _crash_then_recover(pipeline, "driver.before_end_txn@1#1")
    pipeline.commit_first_decided(1)  # its EndTxn reached the coordinator before the kill
    assert not pipeline.store().is_confirmed(1)
    states = sorted(
        d.state.value
        for d in pipeline.transactions(pipeline.decided_transactional_ids(1)).values()
        if d
    )
    assert states == [TxnState.COMPLETE_COMMIT.value, TxnState.ONGOING.value]
    assert pipeline.uncommitted_count() == 200

    assert_ran(pipeline.run())
    assert_exactly_once(pipeline)
    assert pipeline.uncommitted_count() == 300


def test_e_crash_after_commit_before_spark_commit_log(pipeline: Pipeline) -> None:
    _crash_then_recover(pipeline, "driver.after_commit@1")
    assert pipeline.store().is_confirmed(1)
    assert 1 not in pipeline.spark_committed_batches()  # Spark will replay batch 1
    assert pipeline.committed() == Counter(range(200))

    assert_ran(pipeline.run())
    assert_exactly_once(pipeline)
    assert 1 in pipeline.spark_committed_batches()
    assert pipeline.uncommitted_count() == 300  # the replay of batch 1 wrote nothing
