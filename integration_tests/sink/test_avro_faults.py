"""The fault matrix's smoke case with Avro payloads: raw Avro records in, read by the kafka-eos
source, written as Avro by the exactly-once sink, with the driver killed after batch 1's
decision and before any of its transactions is committed. A read_committed drain, decoded,
must hold every number exactly once. Once, on the default Kafka version: Avro changes the
payload, not the protocol, which the fault matrix covers on both versions.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from connectors.kafka.txn_state import TxnState
from integration_tests.sink.harness import (
    ALL,
    BATCH_0,
    BATCH_1,
    KILLED,
    assert_exactly_once,
    assert_ran,
    fed_pipeline,
)
from kafka_eos.cluster import KafkaCluster

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def test_avro_payloads_survive_a_crash_after_the_decision(
    kafka: KafkaCluster, tmp_path: Path
) -> None:
    pipeline = fed_pipeline(kafka.bootstrap_servers, tmp_path / "checkpoint", avro=True)
    assert_ran(pipeline.run("driver.before_end_txn@1#1"), KILLED)
    store = pipeline.store()
    assert store.checkpoint_ids() == [0, 1] and not store.is_confirmed(1)  # batch 1 decided ...
    tids = pipeline.decided_transactional_ids(1)
    assert len(tids) == 2, tids
    assert pipeline.transaction_states(tids) == dict.fromkeys(tids, TxnState.ONGOING)
    assert pipeline.committed() == BATCH_0  # ... not yet visible
    assert pipeline.uncommitted() == BATCH_0 + BATCH_1  # its Avro records are in the log

    assert_ran(pipeline.run())
    assert_exactly_once(pipeline)
    assert pipeline.uncommitted() == ALL  # the decided batch was committed, not written again
