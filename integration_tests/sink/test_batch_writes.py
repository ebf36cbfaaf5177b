"""Batch writes, ``df.write.format("kafka-eos")``, killed at the worst moments (issue 28).

Each job writes the numbers 0..299 from two tasks in one batch write, in a process group of
its own that a crash point kills whole (driver, JVM, Python workers). A read_committed drain
then counts every number, key by key: nothing may be visible before the decision, and after
the rerun every number is there exactly once. A write that crashes nothing, and its rerun,
run in the suite's shared SparkSession (``test_conformance.py``).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from connectors.kafka.txn_state import TxnState
from integration_tests.conftest import create_topic
from integration_tests.sink.harness import (
    ALL,
    KILLED,
    Pipeline,
    assert_exactly_once,
    assert_ran,
)
from kafka_eos.cluster import KafkaCluster

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


@pytest.fixture
def write(kafka: KafkaCluster, tmp_path: Path) -> Pipeline:
    bootstrap = kafka.bootstrap_servers
    return Pipeline(
        bootstrap, create_topic(bootstrap, partitions=2), tmp_path / "write", batch=True
    )


def _refused_as_written(result_stderr: str) -> None:
    assert "KAFKA_EOS.SINK.ALREADY_WRITTEN" in result_stderr, result_stderr[-4000:]


def test_a_driver_killed_between_the_decision_and_the_commits(write: Pipeline) -> None:
    """The worst moment: the write is decided and none of its transactions is committed.
    Nothing is visible until the rerun, which commits the decided transactions, and then
    refuses to write the rows a second time."""
    assert_ran(write.run("driver.before_end_txn@0#1"), KILLED)
    decided = write.decided_transactional_ids(0)
    assert len(decided) == 2  # one transaction per task
    assert not write.store().is_confirmed(0)
    assert write.committed() == Counter()  # nothing visible before a commit
    assert write.uncommitted() == ALL  # the tasks' records, in open transactions
    assert {t.state for t in write.transactions(decided).values() if t} == {TxnState.ONGOING}
    rerun = write.run()
    assert rerun.returncode != 0
    _refused_as_written(rerun.stderr)
    assert "finished now" in rerun.stderr
    assert write.store().is_confirmed(0)
    assert_exactly_once(write)


def test_a_driver_killed_before_the_decision(write: Pipeline) -> None:
    """Every task pre-committed, nothing decided: nothing becomes visible, and the rerun
    writes every row once, its commit fencing what the dead run left open."""
    assert_ran(write.run("driver.before_decision@0"), KILLED)
    assert write.store().get(0) is None
    assert write.uncommitted() == ALL
    assert write.committed() == Counter()
    left_open = write.open_transactions()
    assert left_open
    assert_ran(write.run())
    assert_exactly_once(write)
    assert write.uncommitted() == ALL + ALL  # the dead run's records, aborted
    states = {t.state for t in write.transactions(left_open).values() if t}
    assert TxnState.ONGOING not in states


def test_a_task_that_fails_after_its_pre_commit_is_retried_without_a_duplicate(
    write: Pipeline,
) -> None:
    """Spark retries the task; the first attempt's transaction, pre-committed but never
    reported, must not become visible beside the retry's."""
    write.master = "local[2,2]"  # two attempts per task: local mode retries none by default
    assert_ran(write.run("task.after_pre_commit@0#1:raise"))
    assert_exactly_once(write)
    assert write.uncommitted() - ALL  # the failed attempt did write, and stays invisible
