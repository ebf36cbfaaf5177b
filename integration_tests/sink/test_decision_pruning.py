"""The decision store's pruning on a real disk, in a query long enough to run it.

The sink keeps the ten newest decisions (``SnapshotStore``'s ``retain``) and prunes after each
batch's confirmation; an unconfirmed decision is never pruned, since recovery needs it to commit
again. The fault matrix's queries run three batches, so no prune there ever deletes anything.
The default version only: pruning is the store's, not the transactions protocol's.
"""

from __future__ import annotations

import pytest

from integration_tests.sink.conftest import default_version_only
from integration_tests.sink.harness import KILLED, Pipeline, assert_exactly_once, assert_ran

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

BATCHES, RETAIN = 14, 10


@default_version_only
def test_a_long_query_keeps_ten_decisions_and_recovers_one_decided_after_pruning(
    pipeline: Pipeline,
) -> None:
    # One task a batch: the batches' count is what matters here, not their width.
    pipeline.count, pipeline.per_batch, pipeline.partitions = BATCHES * 10, 10, 1
    # Killed after batch 12's decision, before any of its EndTxns: eleven prunes have run.
    assert_ran(pipeline.run("driver.before_end_txn@12#1"), KILLED)
    store = pipeline.store()
    assert store.checkpoint_ids() == list(range(12 - RETAIN, 13))
    assert store.unconfirmed_ids() == [12]
    assert pipeline.spark_committed_batches() == set(range(12))

    assert_ran(pipeline.run())
    store = pipeline.store()
    assert store.checkpoint_ids() == list(range(BATCHES - RETAIN, BATCHES))
    assert store.unconfirmed_ids() == []
    assert pipeline.spark_committed_batches() == set(range(BATCHES))
    assert_exactly_once(pipeline)
