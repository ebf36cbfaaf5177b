"""A wide query: 128 input and 128 output partitions, coalesced into 16 sink tasks on executors
in JVMs of their own (``local-cluster``), killed after batch 1's decision and before any of its
EndTxns, then restarted.

The other sink tests write two or three partitions from two or three tasks. Here the 16
committables travel from executor processes to the driver, each transaction spans dozens of
the 128 output partitions, one decision names them all, and the restart's recovery commits all
of them before the replay's tasks run. Counted with a read_committed reader, number by number.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from connectors.kafka.txn_state import TxnState
from integration_tests.conftest import create_topic
from integration_tests.sink.conftest import default_version_only
from integration_tests.sink.harness import (
    KILLED,
    Pipeline,
    assert_exactly_once,
    assert_ran,
    fill_numbers,
    states_of,
)
from kafka_eos.cluster import KafkaCluster

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

PARTITIONS = 128  # of the input topic and of the output topic
TASKS = 16
PER_BATCH = PARTITIONS * 8  # 64 records a task, on about 50 of the 128 output partitions
BATCHES = 3


def batch(k: int) -> Counter[int]:
    """Batch k's numbers: the source spreads maxOffsetsPerTrigger over the partitions in
    proportion to what each holds, and number n is at partition n % PARTITIONS, so batch k
    holds the same eight offsets of every partition."""
    return Counter(range(k * PER_BATCH, (k + 1) * PER_BATCH))


# The protocol is the fault matrix's (c), which runs on every transactions protocol.
@default_version_only
def test_a_query_of_128_partitions_in_16_tasks_recovers_its_decided_batch(
    versioned_kafka: KafkaCluster, tmp_path: Path
) -> None:
    bootstrap = versioned_kafka.bootstrap_servers
    numbers = create_topic(bootstrap, partitions=PARTITIONS)
    fill_numbers(bootstrap, numbers, count=PER_BATCH * BATCHES, partitions=PARTITIONS)
    pipeline = Pipeline(
        bootstrap,
        create_topic(bootstrap, partitions=PARTITIONS),
        tmp_path / "checkpoint",
        input_topic=numbers,
        count=PER_BATCH * BATCHES,
        per_batch=PER_BATCH,
        master="local-cluster[2,1,1024]",
        sink_tasks=TASKS,
    )

    assert_ran(pipeline.run("driver.before_end_txn@1#1"), KILLED)
    store = pipeline.store()
    assert store.checkpoint_ids() == [0, 1] and not store.is_confirmed(1)
    assert pipeline.spark_committed_batches() == {0}
    decided = pipeline.decided_transactional_ids(1)
    assert len(set(decided)) == TASKS, decided  # one transaction a task
    described = pipeline.transactions(decided)
    assert states_of(described) == dict.fromkeys(decided, TxnState.ONGOING)
    # Each transaction spans dozens of output partitions, and together they span all 128.
    spans = [set(d.partitions) for d in described.values() if d]
    assert min(len(span) for span in spans) >= 30, [len(span) for span in spans]
    assert len(set().union(*spans)) == PARTITIONS
    assert pipeline.committed() == batch(0)
    assert pipeline.uncommitted() == batch(0) + batch(1)

    assert_ran(pipeline.run())
    assert_exactly_once(pipeline)
    assert pipeline.uncommitted() == batch(0) + batch(1) + batch(2)  # the replay wrote nothing
