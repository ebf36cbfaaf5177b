"""A job written for Spark's Kafka sink, with only the format name changed (issue 14).

It sets neither ``transactionalIdPrefix`` nor ``kafka.transaction.timeout.ms``: the sink
derives the prefix from the checkpoint location and chooses the timeout from the brokers'
``transaction.max.timeout.ms`` (15 min on a broker with Kafka's defaults, as here). Both are
checked where they matter: after a crash, the restarted query must find the lingering
transactions of the derived prefix again, however the location is spelled; and a query reset
on the same location (a new query id, the same derived prefix) must meet the old query's open
transactions with the shared-prefix guard's error, not abort them. On the default Kafka
version only: neither default depends on the transaction protocol's version.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from connectors.kafka.sink.naming import derived_prefix
from connectors.kafka.txn_state import TxnState
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
from kafka_eos.cluster import KafkaCluster

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

BROKER_DEFAULT_MAX_MS = 900_000  # transaction.max.timeout.ms on a broker with Kafka's defaults


@pytest.fixture
def pipeline(kafka: KafkaCluster, tmp_path: Path) -> Pipeline:
    """The fault matrix's query, with the sink's defaults."""
    return fed_pipeline(kafka.bootstrap_servers, tmp_path / "checkpoint", prefix=None)


def _crash_before_the_decision_of_batch_1(pipeline: Pipeline) -> list[str]:
    """Batch 1 pre-committed by both tasks, never decided: its transactions linger."""
    assert_ran(pipeline.run("driver.before_decision@1"), KILLED)
    assert pipeline.store().checkpoint_ids() == [0]
    assert pipeline.uncommitted() == BATCH_0 + BATCH_1 and pipeline.committed() == BATCH_0
    lingering = pipeline.open_transactions()
    assert len(lingering) == 2, lingering  # one per task, under the derived prefix
    assert pipeline.transaction_states(lingering) == dict.fromkeys(lingering, TxnState.ONGOING)
    return lingering


def test_a_reset_query_stops_at_the_crashed_querys_transactions_which_then_recovers(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    """One crash, two checks of the derived prefix (one job each before, merged to save two
    driver starts): a query reset on the same location meets the crashed query's lingering
    transactions and must stop without aborting them; then the crashed query, restarted with
    its location spelled as a URI, must find them again, abort them and finish exactly once."""
    lingering = _crash_before_the_decision_of_batch_1(pipeline)
    prefix = derived_prefix(str(pipeline.checkpoint))
    assert all(tid.startswith(f"{prefix}-") for tid in lingering)
    described = pipeline.transactions(lingering)
    assert {tid: d.timeout_ms if d else None for tid, d in described.items()} == dict.fromkeys(
        lingering, BROKER_DEFAULT_MAX_MS
    )

    # The user resets the query: a fresh checkpoint at the same location, so a new query id
    # (another owner) under the same derived prefix. The old checkpoint is kept aside here,
    # to finish the old query afterwards.
    kept = tmp_path / "old-checkpoint"
    pipeline.checkpoint.rename(kept)
    reset = pipeline.run()
    assert reset.returncode != 0, "the reset query decided a batch beside open transactions"
    message = reset.stderr
    assert f"transactionalIdPrefix {pipeline.transactional_id_prefix!r} is in use" in message
    assert "the prefix was derived from the checkpoint location" in message
    assert f"checkpoint {str(pipeline.checkpoint)!r}, registered" in message  # the old one's
    assert all(tid in message for tid in lingering)  # named, and left alone:
    assert sorted(pipeline.open_transactions()) == sorted(lingering)
    assert pipeline.committed() == BATCH_0  # the reset query's batch 0 was not decided
    before_restart = pipeline.uncommitted()

    # Back to the old query. Its restart spells the same location as a URI with a trailing
    # slash: Spark reads the same checkpoint, and the sink must derive the same prefix to
    # find the lingering transactions, which it aborts before it replays batch 1.
    pipeline.checkpoint.rename(tmp_path / "reset-checkpoint")
    kept.rename(pipeline.checkpoint)
    pipeline.location = f"file://{pipeline.checkpoint}/"
    assert_ran(pipeline.run())
    assert_exactly_once(pipeline)  # read_committed: none missing, none twice, nothing open
    # The replay wrote batches 1 and 2 once more; the first copy of batch 1 stays aborted.
    assert pipeline.uncommitted() == before_restart + (ALL - BATCH_0)


def test_a_restart_that_fails_its_checks_still_commits_the_decided_batch(
    pipeline: Pipeline,
) -> None:
    """Batch 1 is decided, and the driver dies before its commits. The restart raises
    maxBatchDuration, so that no timeout the brokers allow passes EOS002, and fails; it must
    commit batch 1 first. Otherwise the decided transactions would wait for a restart that
    passes, and be lost if it came after their timeout."""
    assert_ran(pipeline.run("driver.before_end_txn@1"), KILLED)
    assert pipeline.store().checkpoint_ids() == [0, 1] and not pipeline.store().is_confirmed(1)
    assert pipeline.committed() == BATCH_0
    tids = pipeline.decided_transactional_ids(1)
    assert len(tids) == 2, tids
    assert pipeline.transaction_states(tids) == dict.fromkeys(tids, TxnState.ONGOING)

    refused = pipeline.run(options={"maxBatchDuration": "1h"})
    assert refused.returncode != 0 and "EOS002" in refused.stderr, refused.stderr[-3000:]
    assert pipeline.committed() == BATCH_0 + BATCH_1  # the decided batch, committed anyway
    assert pipeline.store().is_confirmed(1)
    assert pipeline.transaction_states(tids) == dict.fromkeys(tids, TxnState.COMPLETE_COMMIT)
    assert pipeline.open_transactions() == []

    assert_ran(pipeline.run())
    assert_exactly_once(pipeline)
