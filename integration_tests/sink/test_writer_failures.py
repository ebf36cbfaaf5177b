"""A task whose input cannot be written fails loudly, and leaves nothing for readers.

Faults injected: a record above the producer's ``message.max.bytes``, or above the topic's
limit on the broker, arrives after the task's transaction has already written records to the
log; the producer is fenced mid-task; the task outlives its transaction. The task must stop
with an error that names what happened and the fix, and leave its transaction open for the
driver (read_committed readers see none of the records that read_uncommitted readers see),
whose fence aborts it and checks its ABORT markers. A full local queue is no failure: it only
delays records, in order.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pyarrow as pa
import pytest
from confluent_kafka import Producer

from checkpoint.errors import ConfigError
from checkpoint.model import Committable
from connectors.kafka.sink.committer import KafkaCommitter
from connectors.kafka.sink.exactly_once_writer import ExactlyOnceWriter
from connectors.kafka.sink.writer import DeliveryFailed, TransactionTooLong
from connectors.kafka.transactions import TransactionAdmin
from connectors.kafka.txn_state import TxnState
from integration_tests.conftest import create_topic
from integration_tests.sink.conftest import default_version_only
from integration_tests.sink.transactions import describe, values
from kafka_eos.cluster import KafkaCluster
from kafka_eos.operations.drain import drain

pytestmark = pytest.mark.kafka


def test_an_oversized_record_fails_the_task_and_leaves_its_transaction_to_the_driver(
    versioned_kafka: KafkaCluster, admin: TransactionAdmin
) -> None:
    bootstrap = versioned_kafka.bootstrap_servers
    topic = create_topic(bootstrap)
    tid = f"oversized-{uuid.uuid4().hex[:8]}-0"
    writer = ExactlyOnceWriter(
        {"bootstrap.servers": bootstrap, "message.max.bytes": 2_000}, topic, [tid], timeout_s=30
    )

    message = _written_then_refused(writer)

    assert "5000 bytes (key + value)" in message and "message.max.bytes = 2000" in message
    assert "Nothing of this batch is visible" in message
    _assert_aborted_after_writing(admin, bootstrap, topic, tid)


def _written_then_refused(writer: ExactlyOnceWriter) -> str:
    """Two small records, flushed into the log, then one of 5 kB; the task's error."""

    def task_input() -> Iterator[pa.RecordBatch]:
        yield pa.RecordBatch.from_pydict({"value": [b"small-0", b"small-1"]})
        assert writer._producer is not None and writer._producer.flush(30) == 0  # in the log
        yield pa.RecordBatch.from_pydict({"value": [b"x" * 5_000]})

    with pytest.raises(ConfigError) as caught:
        writer.write_and_pre_commit(0, task_input())
    return str(caught.value)


def _assert_aborted_after_writing(
    admin: TransactionAdmin, bootstrap: str, topic: str, tid: str
) -> None:
    assert values(bootstrap, topic, "read_uncommitted") == {"small-0": 1, "small-1": 1}
    assert values(bootstrap, topic, "read_committed") == {}
    # Held, so that a retry takes another id; the driver's fence (the sweep) aborts it.
    now = describe(admin, tid)
    assert now.state == TxnState.ONGOING
    committer = KafkaCommitter({"bootstrap.servers": bootstrap}, None, 30.0)
    try:
        committer.abort(
            Committable(tid, now.producer_id, now.epoch, 2, now.partitions, now.start_time_ms)
        )
    finally:
        committer.close()
    assert describe(admin, tid).state == TxnState.COMPLETE_ABORT
    assert values(bootstrap, topic, "read_committed") == {}


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
    # Left open for the driver's fence, unless the broker's timeout aborted it meanwhile.
    left = (TxnState.ONGOING, TxnState.PREPARE_ABORT, TxnState.COMPLETE_ABORT)
    assert describe(admin, tid).state in left
    assert values(bootstrap, topic, "read_committed") == {}


# The write path hands each Arrow batch to librdkafka in one produce_batch call per topic, and
# hears of a record only when it failed. Each way a record can fail must still stop the task
# and leave nothing for read_committed readers. The producer does not
# depend on the broker's transaction version: the default Kafka only.


def _batches(prefix: str, count: int, size: int = 500) -> Iterator[pa.RecordBatch]:
    for start in range(0, count, size):
        yield pa.RecordBatch.from_pydict(
            {"value": [f"{prefix}-{i:05d}" for i in range(start, min(start + size, count))]}
        )


@default_version_only
def test_a_record_the_broker_refuses_fails_the_task_with_the_fix(
    versioned_kafka: KafkaCluster, admin: TransactionAdmin
) -> None:
    """The producer lets a 5 kB record through (its limit is 1 MB); the topic's limit is 1 kB,
    so the broker refuses it in the delivery report, after earlier records were written."""
    bootstrap = versioned_kafka.bootstrap_servers
    topic = create_topic(bootstrap, config={"max.message.bytes": "1000"})
    tid = f"refused-{uuid.uuid4().hex[:8]}-0"
    writer = ExactlyOnceWriter({"bootstrap.servers": bootstrap}, topic, [tid], timeout_s=30)

    message = _written_then_refused(writer)

    assert "the broker rejected a record as too large" in message
    assert "max.message.bytes" in message and "Nothing of this batch is visible" in message
    _assert_aborted_after_writing(admin, bootstrap, topic, tid)


@default_version_only
def test_a_full_local_queue_delays_records_and_keeps_their_order(
    versioned_kafka: KafkaCluster, admin: TransactionAdmin
) -> None:
    """A queue of 100 records, batches of 500: most of every produce_batch is refused as the
    queue is full, and queued again once it drained. Every record arrives, once, in order."""
    bootstrap = versioned_kafka.bootstrap_servers
    topic = create_topic(bootstrap)
    tid = f"queue-full-{uuid.uuid4().hex[:8]}-0"
    config = {"bootstrap.servers": bootstrap, "queue.buffering.max.messages": "100"}
    writer = ExactlyOnceWriter(config, topic, [tid], timeout_s=30)

    committable = writer.write_and_pre_commit(0, _batches("r", 3_000))

    assert committable.record_count == 3_000
    assert committable.partitions == ((topic, 0),)
    written = drain(bootstrap, topic, "read_uncommitted", timeout_s=30)
    assert [r.value.decode() for r in written] == [f"r-{i:05d}" for i in range(3_000)]
    KafkaCommitter({"bootstrap.servers": bootstrap}, timeout_s=30).abort(committable)


@default_version_only
def test_a_fenced_producer_fails_the_task_and_none_of_its_records_is_visible(
    versioned_kafka: KafkaCluster, admin: TransactionAdmin
) -> None:
    """Another producer takes the task's transactional id mid-task (a zombie's successor):
    the coordinator aborts the task's transaction, and the task's next records fail."""
    bootstrap = versioned_kafka.bootstrap_servers
    topic = create_topic(bootstrap)
    tid = f"fenced-{uuid.uuid4().hex[:8]}-0"
    writer = ExactlyOnceWriter({"bootstrap.servers": bootstrap}, topic, [tid], timeout_s=30)
    successor = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid})

    def task_input() -> Iterator[pa.RecordBatch]:
        yield from _batches("before", 1_000)
        assert writer._producer is not None and writer._producer.flush(30) == 0
        successor.init_transactions(30)  # fences the task's producer, aborts its transaction
        yield from _batches("after", 1_000)

    with pytest.raises(DeliveryFailed) as caught:
        writer.write_and_pre_commit(0, task_input())

    message = str(caught.value)
    assert "fatal error" in message and "fenced" in message and "Spark retries" in message
    assert values(bootstrap, topic, "read_committed") == {}
    # The successor's init aborted the task's transaction and holds the id, with none open.
    assert describe(admin, tid).state in (TxnState.EMPTY, TxnState.COMPLETE_ABORT)
    successor.close()  # none open: its threads end with the test, not after the cluster stops


@default_version_only
def test_rows_pinned_to_a_partition_land_there_in_order(
    versioned_kafka: KafkaCluster, admin: TransactionAdmin
) -> None:
    """The fast path's calls carry the partition: confluent-kafka's produce_batch ignores a
    message's own, and would spread pinned rows over every partition."""
    bootstrap = versioned_kafka.bootstrap_servers
    topic = create_topic(bootstrap, partitions=4)
    tid = f"pinned-{uuid.uuid4().hex[:8]}-0"
    writer = ExactlyOnceWriter({"bootstrap.servers": bootstrap}, topic, [tid], timeout_s=30)
    pinned = [2, 2, 3, None, 2, 0, 2]
    batch = pa.RecordBatch.from_pydict(
        {"value": [f"r{i}" for i in range(len(pinned))], "partition": pa.array(pinned, pa.int32())}
    )

    committable = writer.write_and_pre_commit(0, [batch])
    try:
        written = drain(bootstrap, topic, "read_uncommitted", timeout_s=30)
        placed = {r.value.decode(): r.partition for r in written}
        wanted = {f"r{i}": p for i, p in enumerate(pinned) if p is not None}
        assert wanted.items() <= placed.items()
        # In order among the rows pinned there; r3 has no partition, and the partitioner
        # (murmur2_random: a random one for a null key) may put it on any.
        in_2 = [
            r.value.decode()
            for r in written
            if r.partition == 2 and wanted.get(r.value.decode()) == 2
        ]
        assert in_2 == ["r0", "r1", "r4", "r6"]
        assert {(topic, 0), (topic, 2), (topic, 3)} <= set(committable.partitions)
    finally:
        KafkaCommitter({"bootstrap.servers": bootstrap}, timeout_s=30).abort(committable)
