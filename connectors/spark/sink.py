"""The Spark side of the Kafka sink: ``df.writeStream.format("kafka-eos")``.

Spark's micro-batch is the checkpoint. For batch N with ``deliveryGuarantee=exactly_once``:

1. Driver, when Spark creates the writer: startup checks (the same rules as
   ``kafka-eos lint``).
2. Each write task (executor): the end of its input is its barrier. It produces into one
   transaction on ``<prefix>-<task partition id>`` (``init_transactions`` first fences a
   zombie attempt of the same task and aborts its transaction) and pre-commits: flush, no
   commit. Its commit message carries the committable. A task of a batch that is already
   decided (a replay) writes nothing.
3. Driver, ``commit(messages, N)``, the completion notification: check that every
   pre-committed transaction is still open, abort lingering transactions of the prefix, write
   the decision durably, then commit each transaction with EndTxn
   (``checkpoint.Coordinator.complete``). For a replayed batch that is already decided, only
   the recorded decision's commits are re-driven (they are idempotent).
4. Driver, ``abort(messages, N)``: abort the pre-committed transactions, unless N is decided.

Where things run matters: the writer object is built on the driver and pickled to executors,
so it holds only options and small values, never open clients.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructType,
)

from checkpoint.coordinator import Coordinator, CoordinatorConfig
from checkpoint.crashpoints import checkpoint_scope, crash_point
from checkpoint.errors import CheckpointCommitFailed, ConfigError
from checkpoint.model import Committable
from checkpoint.store import SnapshotStore, location_exists
from connectors.kafka.committer import KafkaCommitter
from connectors.kafka.errors import TransactionLostError
from connectors.kafka.naming import transactional_id
from connectors.kafka.sink_options import DeliveryGuarantee, SinkOptions
from connectors.kafka.writer import AtLeastOnceWriter, ExactlyOnceWriter, NoGuaranteeWriter
from connectors.lint import check_sink_config, raise_for_errors
from connectors.lint.live import read_cluster

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import DataType

_log = logging.getLogger(__name__)
_BYTES = (StringType, BinaryType)
COMMIT_MESSAGE_VERSION = 1


@dataclass(frozen=True)
class KafkaCommitMessage(WriterCommitMessage):
    """What a task hands the driver: minimal and picklable. Versioned, because a driver and
    executors of different releases must refuse each other's messages, not misread them."""

    batch_id: int
    committable: Committable
    version: int = COMMIT_MESSAGE_VERSION


def stream_writer(options: dict[str, str], schema: StructType) -> DataSourceStreamArrowWriter:
    """Pick the writer for the delivery guarantee, as Flink's ``KafkaSink`` picks its writer."""
    sink = SinkOptions.parse(options)
    check_input_schema(schema, sink.topic)
    if sink.guarantee == DeliveryGuarantee.EXACTLY_ONCE:
        return ExactlyOnceStreamWriter(sink)
    return FlushingStreamWriter(sink)


def check_input_schema(schema: StructType, topic_option: str | None) -> None:
    """The columns of Spark's Kafka sink, with their types; other columns are ignored."""
    # Exact names, as Spark's Kafka sink: records are read by these names, so a 'Value' column
    # must not pass for 'value' (its records would be written with a null value).
    fields = {f.name: f.dataType for f in schema.fields}

    def expect(name: str, allowed: tuple[type[DataType], ...], required: bool, what: str) -> None:
        found = fields.get(name)
        if found is None:
            if required:
                raise ConfigError(
                    f"the sink needs a '{name}' column ({what}); columns: {list(fields)}"
                )
            return
        if not isinstance(found, allowed):
            raise ConfigError(
                f"column '{name}' has type {found.simpleString()}; expected {what}: "
                f"cast it, e.g. df.selectExpr('CAST({name} AS STRING) AS {name}')"
            )

    expect("value", _BYTES, True, "string or binary")
    expect("key", _BYTES, False, "string or binary")
    if topic_option is None:  # the option overrides a topic column, whatever its type (Spark)
        expect("topic", (StringType,), True, "string, or set the option 'topic'")
    expect("partition", (IntegerType,), False, "int")
    headers = fields.get("headers")
    if headers is not None and not (
        isinstance(headers, ArrayType)
        and isinstance(headers.elementType, StructType)
        and [(f.name, type(f.dataType)) for f in headers.elementType.fields]
        == [("key", StringType), ("value", BinaryType)]
    ):
        raise ConfigError(
            f"column 'headers' has type {headers.simpleString()}; expected "
            "array<struct<key:string,value:binary>> as in Spark's Kafka sink"
        )


def _batch_id_and_partition() -> tuple[int, int]:
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        raise RuntimeError("the Kafka sink's write() must run inside a Spark task")
    return int(context.getLocalProperty("streaming.sql.batchId")), context.partitionId()


class ExactlyOnceStreamWriter(DataSourceStreamArrowWriter):
    """Two-phase commit across Spark tasks, with the driver as coordinator.

    Spark builds this object more than once per batch (to plan the tasks, and again in the
    process that runs ``commit``), so the constructor only validates: recovery at construction
    would abort the very transactions the batch's tasks just pre-committed.
    """

    def __init__(self, sink: SinkOptions) -> None:
        self._sink = sink
        _startup_checks(sink)
        # Read here, on the driver, and pickled to the tasks: executors never read the
        # decisions, which may live where only the driver can reach them. Spark creates the
        # writer before it runs a batch, and only a batch's own commit() can decide it, so a
        # batch found here was decided by an earlier run: it is a replay.
        self._decided = frozenset(self._store().checkpoint_ids())

    def _store(self) -> SnapshotStore:
        return SnapshotStore(self._sink.decision_location)

    def _coordinator(self) -> tuple[Coordinator, KafkaCommitter]:
        sink = self._sink
        assert sink.transactional_id_prefix is not None
        committer = KafkaCommitter(
            sink.producer_config, sink.transactional_id_prefix, sink.commit_timeout_s
        )
        config = CoordinatorConfig(pipeline_id=sink.transactional_id_prefix)
        return Coordinator(self._store(), committer, config), committer

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaCommitMessage:
        """Step 2, in a task: produce, then pre-commit at the barrier (end of input)."""
        batch_id, partition = _batch_id_and_partition()
        assert self._sink.transactional_id_prefix is not None
        tid = transactional_id(self._sink.transactional_id_prefix, partition)
        if batch_id in self._decided:
            # A replay of a decided batch (crash after the decision, before Spark recorded the
            # batch as done): its output is committed, or will be by commit(); writing it
            # again would duplicate it, and its init_transactions would fence the decided
            # transaction before commit() could commit it.
            return KafkaCommitMessage(batch_id, Committable(tid, -1, -1, 0))
        writer = ExactlyOnceWriter(
            self._sink.producer_config, self._sink.topic, tid, self._sink.flush_timeout_s
        )
        committable = writer.write_and_pre_commit(batch_id, iterator)
        # A task can still fail after its pre-commit (its result lost on the way to the driver):
        # the retry's init_transactions must fence this attempt and abort its transaction.
        crash_point("task.after_pre_commit", checkpoint_id=batch_id)
        return KafkaCommitMessage(batch_id, committable)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Step 3, on the driver: the completion notification."""
        check_sees_spark_checkpoint(self._sink, batchId)
        committables = _committables(messages, batchId)
        coordinator, committer = self._coordinator()
        try:
            if not coordinator.store.contains(batchId):
                crash_point("driver.before_decision", checkpoint_id=batchId)
                committer.verify_pre_committed(batchId, committables)
                # Lingering transactions of dead attempts, or of task ids beyond today's
                # parallelism, hold back read_committed readers: abort all but this batch's.
                committer.recover(committables)
            # Decision, then EndTxn per transaction; for a replayed, decided batch the
            # recorded decision's commits are re-driven instead.
            with checkpoint_scope(batchId):
                coordinator.complete(batchId, committables)
            crash_point("driver.after_commit", checkpoint_id=batchId)
        except CheckpointCommitFailed as exc:
            # A lost transaction of a decided batch is data loss: surface its own message, even
            # when another transaction's failure (a timeout) came first.
            lost = next((e for e in exc.errors if isinstance(e, TransactionLostError)), None)
            if lost is not None:
                raise lost.in_batch(batchId, exc.failed) from exc
            raise
        finally:
            committer.close()

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Step 4, on the driver: roll back; a decided batch is left for recovery to commit."""
        coordinator, committer = self._coordinator()
        try:
            coordinator.abort(batchId, _committables(messages, batchId), reason="spark-abort")
        finally:
            committer.close()


class FlushingStreamWriter(DataSourceStreamArrowWriter):
    """``at_least_once`` and ``none``: each task flushes at its barrier; nothing to commit."""

    def __init__(self, sink: SinkOptions) -> None:
        self._sink = sink

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        writer_class = (
            AtLeastOnceWriter
            if self._sink.guarantee == DeliveryGuarantee.AT_LEAST_ONCE
            else NoGuaranteeWriter
        )
        writer = writer_class(
            self._sink.producer_config, self._sink.topic, self._sink.flush_timeout_s
        )
        writer.write_and_flush(iterator)
        return WriterCommitMessage()

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Records are visible as soon as they are flushed."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Flushed records cannot be taken back; Spark's replay may duplicate them."""


def _committables(messages: list[WriterCommitMessage | None], batch_id: int) -> list[Committable]:
    result = []
    for message in messages:
        if message is None:
            continue
        if not isinstance(message, KafkaCommitMessage) or message.version != COMMIT_MESSAGE_VERSION:
            raise ConfigError(
                f"batch {batch_id}: a task returned {message!r}, not a version "
                f"{COMMIT_MESSAGE_VERSION} kafka-eos commit message: driver and executors "
                "must run the same kafka-eos release"
            )
        if message.batch_id != batch_id:
            raise ConfigError(
                f"batch {batch_id}: a task returned the committable of batch {message.batch_id} "
                f"({message.committable.transactional_id}); deciding it here would commit "
                "another batch's records. Spark handed over the wrong commit messages: report "
                "this as a bug"
            )
        if message.committable.producer_id >= 0:
            result.append(message.committable)
    return result


def check_sees_spark_checkpoint(sink: SinkOptions, batch_id: int) -> None:
    """The decisions must live on the storage of Spark's own checkpoint: Spark has logged
    ``offsets/<batch_id>`` there before running the batch, so the sink must see that file.

    A location without a scheme is the cluster's default filesystem to Spark (``fs.defaultFS``,
    often HDFS) but the driver's local disk to the sink; after a driver restart on another
    host the decisions would be gone, and a half-committed batch would run again (duplicates).
    """
    assert sink.checkpoint_location is not None
    location = sink.checkpoint_location
    entry = f"{location.rstrip('/')}/offsets/{batch_id}"
    if not location_exists(entry):
        raise ConfigError(
            f"option 'checkpointLocation' = {location!r}: Spark logged batch {batch_id} there "
            f"(offsets/{batch_id}), but the sink, which keeps its commit decisions beside it, "
            f"does not see {entry}. Spark resolves a location without a scheme against the "
            "cluster's default filesystem (fs.defaultFS), the sink against the driver's local "
            "disk. Give the location as a full URI, e.g. hdfs://namenode:8020/checkpoints/q or "
            "s3a://bucket/checkpoints/q"
        )


def _startup_checks(sink: SinkOptions) -> None:
    """Fail fast on timeouts that would break the guarantee (rules EOS001, EOS002, EOS004)."""
    security = {k: v for k, v in sink.producer_config.items() if k != "bootstrap.servers"}
    broker_config = read_cluster(sink.bootstrap_servers, [], options=security).broker_config
    raise_for_errors(check_sink_config(sink.producer_config, broker_config, sink.timing))
