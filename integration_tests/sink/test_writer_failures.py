"""A task whose input cannot be written fails loudly, and leaves nothing for readers.

Fault injected: a record above ``message.max.bytes`` arrives after the task's transaction has
already written records to the log. The task must stop with an error that names the size, the
limit and the fix, abort its transaction (read_committed readers see none of the records that
read_uncommitted readers see), and leave no lingering transaction behind.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pyarrow as pa
import pytest

from checkpoint.errors import ConfigError
from connectors.kafka.transactions import TransactionAdmin, TxnState
from connectors.kafka.writer import ExactlyOnceWriter
from integration_tests.conftest import create_topic
from integration_tests.sink.transactions import describe, values
from kafka_eos.cluster import KafkaCluster

pytestmark = pytest.mark.kafka


def test_an_oversized_record_aborts_the_tasks_transaction(
    versioned_kafka: KafkaCluster, admin: TransactionAdmin
) -> None:
    bootstrap = versioned_kafka.bootstrap_servers
    topic = create_topic(bootstrap)
    tid = f"oversized-{uuid.uuid4().hex[:8]}-0"
    writer = ExactlyOnceWriter(
        {"bootstrap.servers": bootstrap, "message.max.bytes": 2_000}, topic, [tid], timeout_s=30
    )

    def task_input() -> Iterator[pa.RecordBatch]:
        yield pa.RecordBatch.from_pydict({"value": [b"small-0", b"small-1"]})
        assert writer._producer is not None and writer._producer.flush(30) == 0  # in the log
        yield pa.RecordBatch.from_pydict({"value": [b"x" * 5_000]})

    with pytest.raises(ConfigError) as caught:
        writer.write_and_pre_commit(0, task_input())

    message = str(caught.value)
    assert "5000 bytes (key + value)" in message and "message.max.bytes = 2000" in message
    assert "Nothing of this batch is visible" in message
    assert values(bootstrap, topic, "read_uncommitted") == {"small-0": 1, "small-1": 1}
    assert values(bootstrap, topic, "read_committed") == {}
    assert describe(admin, tid).state == TxnState.COMPLETE_ABORT
