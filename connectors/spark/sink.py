"""The Spark side of the Kafka sink: ``df.writeStream.format("kafka-eos")``.

Spark's micro-batch is the checkpoint. This module only translates Spark's calls: the order of
the protocol lives in :class:`checkpoint.two_phase_commit.TwoPhaseCommit`, built over Kafka by
:mod:`connectors.kafka.sink.commit_path`; the startup checks are
:mod:`connectors.kafka.sink.startup`, a task's work :mod:`connectors.kafka.sink.tasks`, and
Spark's own checkpoint files are read by :mod:`connectors.spark.query_log`. For batch N with
``deliveryGuarantee=exactly_once``:

1. Driver, when Spark creates the writer (before any task of the batch runs): recovery of
   decided batches (R1: commit every decided, unconfirmed batch; it never aborts, so it is
   safe here), the newest decided batch's COMMIT markers settled (written where a Kafka 4.x
   coordinator skipped one), then startup checks (the same rules as ``kafka-eos lint``).
2. Each write task (executor): the end of its input is its barrier. It produces into one
   transaction on one of its task's transactional ids (:mod:`connectors.kafka.sink.naming`: never
   one that another attempt holds open) and pre-commits: flush, no commit. Its commit message
   carries the committable. A task of a batch that is already decided (a replay) writes
   nothing.
3. Driver, ``commit(messages, N)``, the completion notification: the fingerprint of Spark's
   ``offsets/N`` is the plan; then ``TwoPhaseCommit.complete``: recover decided batches, abort
   this query's lingering transactions (refusing if another query uses the prefix), verify
   every committable, write the decision, commit every transaction, confirm. A replayed batch
   that is already decided re-drives the recorded decision's commits instead.
4. Driver, ``abort(messages, N)``: abort what the batch's tasks left open, unless N is decided.

Where things run matters: the writer object is built on the driver and pickled to executors,
so it holds only options and small values, never open clients.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql.datasource import WriterCommitMessage
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructType,
)

from checkpoint.crashpoints import CrashPoint, checkpoint_scope, crash_point
from checkpoint.errors import CheckpointCommitFailed, ConfigError
from checkpoint.model import Committable
from checkpoint.two_phase_commit import TwoPhaseCommit
from connectors.kafka.sink import tasks
from connectors.kafka.sink.commit_path import (
    BATCH_WRITE_ID,
    exactly_once_protocol,
    first_unconfirmable,
    refuse_batch_write_location,
    settle_newest_decision,
)
from connectors.kafka.sink.committer import KafkaCommitter
from connectors.kafka.sink.naming import TransactionalIdNaming, owner_of
from connectors.kafka.sink.options import ExactlyOnceOptions, SinkOptions
from connectors.kafka.sink.startup import startup_checks
from connectors.spark.compat import DataSourceStreamArrowWriter
from connectors.spark.query_log import spark_plan_of, spark_query_id
from connectors.spark.worker_heap import freeze_imported_heap

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import DataType

_log = logging.getLogger(__name__)
_BYTES = (StringType, BinaryType)
COMMIT_MESSAGE_VERSION = 3  # 2: ids carry an owner and a slot; 3: committables a start time


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
    check_input_schema(schema, sink.topic, avro={column.column for column in sink.avro})
    if sink.exactly_once is not None:
        return ExactlyOnceStreamWriter(sink, sink.exactly_once)
    return FlushingStreamWriter(sink)


def check_input_schema(
    schema: StructType, topic_option: str | None, *, avro: Collection[str] = ()
) -> None:
    """The columns of Spark's Kafka sink, with their types; other columns are ignored. An Avro
    column (``avro``) may have any type: the encoder checks its values against the schema."""
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
        if not isinstance(found, allowed) and name not in avro:
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


def current_task() -> tuple[int | None, int, int, int]:
    """(stream batch id, task partition, attempt number, task attempt id) of the running task;
    the batch id is None in a batch write."""
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        raise RuntimeError("the Kafka sink's write() must run inside a Spark task")
    batch_id = context.getLocalProperty("streaming.sql.batchId")
    return (
        None if batch_id is None else int(batch_id),
        context.partitionId(),
        context.attemptNumber(),
        context.taskAttemptId(),
    )


class ExactlyOnceStreamWriter(DataSourceStreamArrowWriter):
    """Two-phase commit across Spark tasks, with the driver as coordinator.

    Spark builds this object for every batch (and may build it again in the process that
    runs ``commit``), so the constructor does only what is safe at any time: checks, and
    commits of decided batches. Anything that aborts would abort the very transactions a
    batch's tasks just pre-committed. Writing a COMMIT marker a coordinator skipped is safe
    too: it ends only a committed transaction's range.
    """

    def __init__(self, sink: SinkOptions, exactly_once: ExactlyOnceOptions) -> None:
        self._sink = sink
        self._exactly_once = exactly_once
        if exactly_once.prefix_derived:
            _log.info(
                "transactionalIdPrefix not set: %r, derived from checkpointLocation %r",
                exactly_once.transactional_id_prefix, exactly_once.checkpoint_location,
            )  # fmt: skip
        query_id = spark_query_id(exactly_once.checkpoint_location)
        self._naming = TransactionalIdNaming(
            exactly_once.transactional_id_prefix, owner_of(query_id)
        )
        protocol, committer = self._protocol()
        try:
            # Step 1, before the startup checks: a decided batch's transactions must be
            # committed before their timeout, even by a restart whose checks then fail (a
            # changed timing option, a broker that cannot be read); committing needs no
            # timeout. It becomes visible now, not after its replay recomputed every stage.
            protocol.recover_decided()
            # Step 1b: before any task of this batch can take one of its ids, the newest
            # decided batch's markers must be on every partition (KAFKA-20734). Not in Spark's
            # commit runner, whose builds come after the tasks, where the batch's own open
            # transactions would only make the look dearer and a wait eat their lifetime.
            if not _in_commit_runner():
                settle_newest_decision(protocol, committer)
            # The tasks' producers run with the checked timeout, pickled to them in the
            # options; so do the Avro schemas read from files, after the recovery they must
            # not hold up. The checks stop at once on a rejected login, where the best-effort
            # registration below would wait out its deadline first (a minute, then a warning).
            self._sink = tasks.with_schema_files(startup_checks(sink))
            # Before any task opens a transaction, so that another query of the prefix that
            # sees one can name this query's location.
            if sink.topic is not None:
                committer.register_location([(sink.topic, 0)])
        except CheckpointCommitFailed as exc:
            raise first_unconfirmable(exc, None) from exc
        finally:
            committer.close()
        # Read here, on the driver, and pickled to the tasks: executors never read the
        # decisions, which may live where only the driver can reach them. Spark creates the
        # writer before it runs a batch, and only a batch's own commit() can decide it, so a
        # batch found here was decided by an earlier run: it is a replay.
        self._decided = frozenset(protocol.store.checkpoint_ids())
        if BATCH_WRITE_ID in self._decided:
            refuse_batch_write_location(protocol.store, exactly_once.checkpoint_location)

    def _protocol(self) -> tuple[TwoPhaseCommit, KafkaCommitter]:
        return exactly_once_protocol(self._sink, self._exactly_once, self._naming)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaCommitMessage:
        """Step 2, in a task: produce, then pre-commit at the barrier (end of input)."""
        freeze_imported_heap()
        batch_id, partition, attempt, task_attempt_id = current_task()
        if batch_id is None:
            raise RuntimeError("a stream's write() ran in a task without a batch id")
        crash_point(CrashPoint.TASK_BEGIN, checkpoint_id=batch_id)
        candidates = self._naming.slots(partition, attempt, task_attempt_id)
        if batch_id in self._decided:
            # A replay of a decided batch (crash after the decision, before Spark recorded the
            # batch as done): its output is committed, or will be by commit(); writing it
            # again would duplicate it.
            return KafkaCommitMessage(batch_id, Committable.nothing_written(candidates[0]))
        return pre_commit_task(self._sink, batch_id, candidates, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Step 3, on the driver: the completion notification."""
        plan = spark_plan_of(self._exactly_once.checkpoint_location, batchId)
        committables = committables_of(messages, batchId)
        protocol, committer = self._protocol()
        try:
            crash_point(CrashPoint.DRIVER_BEFORE_DECISION, checkpoint_id=batchId)
            with checkpoint_scope(batchId):
                protocol.complete(batchId, committables, plan=plan)
            crash_point(CrashPoint.DRIVER_AFTER_COMMIT, checkpoint_id=batchId)
            # After the commit, when no transaction of the batch is left to age: a sink
            # without the topic option learns its partitions only from its output.
            committer.register_location(p for c in committables for p in c.partitions)
        except CheckpointCommitFailed as exc:
            raise first_unconfirmable(exc, batchId) from exc
        finally:
            committer.close()

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Step 4, on the driver: roll back; a decided batch is left for recovery to commit."""
        protocol, committer = self._protocol()
        try:
            protocol.abort(batchId, committables_of(messages, batchId), reason="spark-abort")
        finally:
            committer.close()


# Spark builds a stream's writer in two driver processes: one that plans each batch and ships
# the writer to its tasks, and its commit runner, which builds one per batch only to call
# commit() or abort() after the tasks ran. A daemon's worker imports its module after the fork;
# without the daemon, the module is __main__.
_COMMIT_RUNNER = "pyspark.sql.worker.python_streaming_sink_runner"


def _in_commit_runner() -> bool:
    main = getattr(sys.modules.get("__main__"), "__spec__", None)
    return _COMMIT_RUNNER in sys.modules or getattr(main, "name", None) == _COMMIT_RUNNER


def pre_commit_task(
    sink: SinkOptions, batch_id: int, candidates: list[str], iterator: Iterator[pa.RecordBatch]
) -> KafkaCommitMessage:
    """A task's step 2 with ``exactly_once``: its pre-committed transaction, as Spark's commit
    message."""
    committable = tasks.pre_commit(sink, batch_id, candidates, iterator)
    # A task can still fail after its pre-commit (its result lost on the way to the driver):
    # its transaction is then a lingering one, which the driver aborts.
    crash_point(CrashPoint.TASK_AFTER_PRE_COMMIT, checkpoint_id=batch_id)
    return KafkaCommitMessage(batch_id, committable)


class FlushingStreamWriter(DataSourceStreamArrowWriter):
    """``at_least_once`` and ``none``: each task flushes at its barrier; nothing to commit."""

    def __init__(self, sink: SinkOptions) -> None:
        self._sink = tasks.with_schema_files(sink)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return flush_task(self._sink, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Records are visible as soon as they are flushed."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Flushed records cannot be taken back; Spark's replay may duplicate them."""


def flush_task(sink: SinkOptions, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
    """A task of ``at_least_once`` or ``none``: produce, and flush at the end of its input."""
    freeze_imported_heap()
    tasks.flush(sink, iterator)
    return WriterCommitMessage()


def committables_of(messages: list[WriterCommitMessage | None], batch_id: int) -> list[Committable]:
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
        if not message.committable.wrote_nothing:
            result.append(message.committable)
    return result
