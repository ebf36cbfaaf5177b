"""A task whose input cannot be written fails loudly, and leaves nothing for readers.

Fault injected: a record above ``message.max.bytes`` arrives after the task's transaction has
already written records to the log. The task must stop with an error that names the size, the
limit and the fix, abort its transaction (read_committed readers see none of the records that
read_uncommitted readers see), and leave no lingering transaction behind.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pyarrow as pa
import pytest

from checkpoint.errors import ConfigError
from connectors.kafka.transactions import TransactionAdmin, TxnState
from connectors.kafka.writer import ExactlyOnceWriter, TransactionTooLong
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


def test_a_task_that_outlives_its_transaction_fails_before_the_broker_aborts_it(
    versioned_kafka: KafkaCluster, admin: TransactionAdmin
) -> None:
    """A batch too large for ``transaction.timeout.ms``: the task fails while the batch can
    still be replayed, naming the timeout and the fix, instead of handing the driver a
    transaction that the broker aborts before (or after) the decision."""
    bootstrap = versioned_kafka.bootstrap_servers
    topic = create_topic(bootstrap)
    tid = f"too-long-{uuid.uuid4().hex[:8]}-0"
    # 4 s timeout, 1 s commit margin (a quarter of it): the task may hold it 3 s.
    config = {"bootstrap.servers": bootstrap, "transaction.timeout.ms": "4000"}
    writer = ExactlyOnceWriter(config, topic, [tid], timeout_s=30, commit_timeout_s=30)
    go_on = threading.Event()

    def task_input() -> Iterator[pa.RecordBatch]:
        yield pa.RecordBatch.from_pydict({"value": [b"early-0", b"early-1"]})
        go_on.wait(3.5)  # a slow upstream stage, past the 3 s the task may hold it
        yield pa.RecordBatch.from_pydict({"value": [b"late"]})

    with pytest.raises(TransactionTooLong) as caught:
        writer.write_and_pre_commit(0, task_input())

    message = str(caught.value)
    assert f"transaction {tid} has been open" in message
    assert "transaction.timeout.ms = 4000" in message and "maxOffsetsPerTrigger" in message
    assert "A batch that can never fit" in message
    assert describe(admin, tid).state in (TxnState.PREPARE_ABORT, TxnState.COMPLETE_ABORT)
    assert values(bootstrap, topic, "read_committed") == {}
