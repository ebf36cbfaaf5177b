"""The Spark side of the Kafka sink: ``df.writeStream.format("kafka-eos")``.

Spark's micro-batch is the checkpoint. This module only translates Spark's calls; the order of
the protocol lives in :class:`checkpoint.two_phase_commit.TwoPhaseCommit`. For batch N with
``deliveryGuarantee=exactly_once``:

1. Driver, when Spark creates the writer (before any task of the batch runs): recovery of
   decided batches (R1: commit every decided, unconfirmed batch; it never aborts, so it is
   safe here), then startup checks (the same rules as ``kafka-eos lint``).
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

import dataclasses
import hashlib
import json
import logging
import time
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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
from checkpoint.store import SnapshotStore, read_location
from checkpoint.two_phase_commit import TwoPhaseCommit
from connectors.avro.batches import BatchEncoder
from connectors.kafka.cluster_facts import LiveClusterError, read_cluster
from connectors.kafka.sink.committer import KafkaCommitter
from connectors.kafka.sink.errors import DecidedTransactionError, TransactionLostError
from connectors.kafka.sink.exactly_once_writer import ExactlyOnceWriter
from connectors.kafka.sink.naming import TransactionalIdNaming, owner_of
from connectors.kafka.sink.options import (
    DeliveryGuarantee,
    ExactlyOnceOptions,
    SinkOptionError,
    SinkOptions,
)
from connectors.kafka.sink.writer import AtLeastOnceWriter, NoGuaranteeWriter
from connectors.policy import checked_sink_config
from connectors.policy.inputs import Timing
from connectors.spark.compat import DataSourceStreamArrowWriter
from connectors.spark.worker_heap import freeze_imported_heap

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import DataType

_log = logging.getLogger(__name__)
_BYTES = (StringType, BinaryType)
# A batch write (connectors.spark.batch_sink) is checkpoint 0 of its location, decided with a
# plan that starts with this; a stream must never take it for its own batch 0.
BATCH_WRITE_ID = 0
BATCH_WRITE_PLAN = "spark-batch-write:"
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


def with_schema_files(sink: SinkOptions) -> SinkOptions:
    """``sink`` with its Avro schema files read, on the driver (executors may not see them)."""
    avro = tuple(column.loaded(SinkOptionError) for column in sink.avro)
    return dataclasses.replace(sink, avro=avro) if avro else sink


def _encoded(sink: SinkOptions, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The batches with their Avro columns encoded, each before it is produced: a value that
    does not fit its schema fails the task, and with exactly_once nothing of it is visible.
    A column without a schema takes its subject's latest here, in the task: never in the
    driver's commit or abort, which a registry outage must not stop."""
    if not sink.avro:
        return batches
    columns = [column.resolved(sink.topic, SinkOptionError) for column in sink.avro]
    return BatchEncoder(columns, sink.topic).encode(batches)


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
    batch's tasks just pre-committed.
    """

    def __init__(self, sink: SinkOptions, exactly_once: ExactlyOnceOptions) -> None:
        self._sink = sink
        self._exactly_once = exactly_once
        if exactly_once.prefix_derived:
            _log.info(
                "transactionalIdPrefix not set: %r, derived from checkpointLocation %r",
                exactly_once.transactional_id_prefix, exactly_once.checkpoint_location,
            )  # fmt: skip
        self._naming = TransactionalIdNaming(
            exactly_once.transactional_id_prefix, owner_of(spark_query_id(exactly_once))
        )
        protocol, committer = self._protocol()
        try:
            # Step 1, before the startup checks: a decided batch's transactions must be
            # committed before their timeout, even by a restart whose checks then fail (a
            # changed timing option, a broker that cannot be read); committing needs no
            # timeout. It becomes visible now, not after its replay recomputed every stage.
            protocol.recover_decided()
            # The tasks' producers run with the checked timeout, pickled to them in the
            # options; so do the Avro schemas read from files, after the recovery they must
            # not hold up. The checks stop at once on a rejected login, where the best-effort
            # registration below would wait out its deadline first (a minute, then a warning).
            self._sink = with_schema_files(startup_checks(sink))
            # Before any task opens a transaction, so that another query of the prefix that
            # sees one can name this query's location.
            if sink.topic is not None:
                committer.register_location([(sink.topic, 0)])
        except CheckpointCommitFailed as exc:
            raise loss_or(exc, None) from exc
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
        plan = spark_plan_of(self._exactly_once, batchId)
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
            raise loss_or(exc, batchId) from exc
        finally:
            committer.close()

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Step 4, on the driver: roll back; a decided batch is left for recovery to commit."""
        protocol, committer = self._protocol()
        try:
            protocol.abort(batchId, committables_of(messages, batchId), reason="spark-abort")
        finally:
            committer.close()


def pre_commit_task(
    sink: SinkOptions, batch_id: int, candidates: list[str], iterator: Iterator[pa.RecordBatch]
) -> KafkaCommitMessage:
    """A task's step 2 with ``exactly_once``: produce its input into one transaction on a free
    id of ``candidates``, and pre-commit it at the barrier (the end of its input)."""
    writer = ExactlyOnceWriter(
        sink.producer_config,
        sink.topic,
        candidates,
        sink.flush_timeout_s,
        commit_timeout_s=sink.commit_timeout_s,
    )
    committable = writer.write_and_pre_commit(batch_id, _encoded(sink, iterator))
    # A task can still fail after its pre-commit (its result lost on the way to the driver):
    # its transaction is then a lingering one, which the driver aborts.
    crash_point(CrashPoint.TASK_AFTER_PRE_COMMIT, checkpoint_id=batch_id)
    return KafkaCommitMessage(batch_id, committable)


def loss_or(exc: CheckpointCommitFailed, batch_id: int | None) -> Exception:
    """A decided batch's transaction that cannot be confirmed as committed (lost, or
    undetermined) must surface its own message, even when another transaction's failure (a
    timeout) came first; a definite loss before an undetermined one."""
    stuck = [e for e in exc.errors if isinstance(e, DecidedTransactionError)]
    if not stuck:
        return exc
    first = next((e for e in stuck if isinstance(e, TransactionLostError)), stuck[0])
    return first.in_batch(exc.checkpoint_id if batch_id is None else batch_id, exc.failed)


def refuse_batch_write_location(store: SnapshotStore, location: str) -> None:
    """A stream must not start on a batch write's location: it would take the write's
    decision for its own batch 0 and skip that batch's rows."""
    recorded = store.get(BATCH_WRITE_ID)
    if recorded is not None and (recorded.plan or "").startswith(BATCH_WRITE_PLAN):
        raise ConfigError(
            f"option 'checkpointLocation' = {location!r} holds the decision of a batch write "
            "(df.write.format('kafka-eos')), not of this stream: give the stream a "
            "checkpoint location of its own"
        )


def exactly_once_protocol(
    sink: SinkOptions, exactly_once: ExactlyOnceOptions, naming: TransactionalIdNaming
) -> tuple[TwoPhaseCommit, KafkaCommitter]:
    """The commit path of a stream's batch or of a batch write, over the decisions kept at
    the checkpoint location. Built afresh for each driver call: Spark may make each call in
    another process."""
    committer = KafkaCommitter(
        sink.producer_config,
        naming,
        sink.commit_timeout_s,
        location=exactly_once.checkpoint_location,
        prefix_derived=exactly_once.prefix_derived,
    )
    store = SnapshotStore(exactly_once.decision_location)
    protocol = TwoPhaseCommit(store, committer, pipeline_id=naming.prefix, sweeps_lingering=True)
    return protocol, committer


class FlushingStreamWriter(DataSourceStreamArrowWriter):
    """``at_least_once`` and ``none``: each task flushes at its barrier; nothing to commit."""

    def __init__(self, sink: SinkOptions) -> None:
        self._sink = with_schema_files(sink)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return flush_task(self._sink, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Records are visible as soon as they are flushed."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Flushed records cannot be taken back; Spark's replay may duplicate them."""


def flush_task(sink: SinkOptions, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
    """A task of ``at_least_once`` or ``none``: produce, and flush at the end of its input."""
    freeze_imported_heap()
    at_least_once = sink.guarantee == DeliveryGuarantee.AT_LEAST_ONCE
    writer_class = AtLeastOnceWriter if at_least_once else NoGuaranteeWriter
    writer = writer_class(sink.producer_config, sink.topic, sink.flush_timeout_s)
    writer.write_and_flush(_encoded(sink, iterator))
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


def spark_plan_of(exactly_once: ExactlyOnceOptions, batch_id: int) -> str:
    """The fingerprint of Spark's ``offsets/<batch_id>``: what Spark planned for the batch."""
    return (
        "sha256:"
        + hashlib.sha256(_spark_log_entry(exactly_once, f"offsets/{batch_id}")).hexdigest()
    )


def spark_query_id(exactly_once: ExactlyOnceOptions) -> str:
    """The id Spark gave the query in its checkpoint (``metadata``): stable across restarts,
    however the location is spelled, and different for two queries on look-alike paths of
    two clusters. The owner part of the query's transactional ids comes from it."""
    entry = _spark_log_entry(exactly_once, "metadata")
    try:
        return str(json.loads(entry)["id"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(
            f"option 'checkpointLocation' = {exactly_once.checkpoint_location!r}: Spark's "
            "metadata file "
            f"there holds {entry[:200]!r}, not a query id ({exc!r}); it was damaged or is not "
            "Spark's: restore it from a backup"
        ) from exc


def _spark_log_entry(exactly_once: ExactlyOnceOptions, name: str) -> bytes:
    """A file of Spark's own checkpoint, e.g. ``offsets/N``, which Spark wrote before it runs
    the batch. The decisions must live on that storage, so the sink must see the file: a
    location without a scheme is the cluster's default filesystem to Spark (``fs.defaultFS``,
    often HDFS) but the driver's local disk to the sink; after a driver restart on another
    host the decisions would be gone, and a half-committed batch would run again."""
    location = exactly_once.checkpoint_location
    entry = f"{location.rstrip('/')}/{name}"
    logged = read_location(entry)
    if logged is None:
        raise ConfigError(
            f"option 'checkpointLocation' = {location!r}: Spark keeps the query's {name} there, "
            f"but the sink, which keeps its commit decisions beside it, does not see {entry}. "
            "Spark resolves a location without a scheme against the cluster's default "
            "filesystem (fs.defaultFS), the sink against the driver's local disk. Give the "
            "location as a full URI, e.g. hdfs://namenode:8020/checkpoints/q or "
            "s3a://bucket/checkpoints/q"
        )
    return logged


def startup_checks(sink: SinkOptions) -> SinkOptions:
    """Fail fast on timeouts that would break the guarantee (rules EOS001, EOS002, EOS004).
    Without ``kafka.transaction.timeout.ms``, the sink runs with a timeout chosen from the
    brokers' maximum, checked by the same rules; the tasks get it inside the options."""
    producer = _checked(
        sink.bootstrap_servers, tuple(sorted(sink.producer_config.items())), sink.timing
    )
    return dataclasses.replace(sink, producer_config=dict(producer))


# How long a passed check stands before the next writer reads the brokers again: a lowered
# transaction.max.timeout.ms is seen within it, and a batch's commit does not wait on it.
_CHECK_REFRESH_S = 600.0
_passed: dict[tuple[Any, ...], tuple[float, tuple[tuple[str, Any], ...]]] = {}


def _checked(
    bootstrap: str, producer: tuple[tuple[str, Any], ...], timing: Timing
) -> tuple[tuple[str, Any], ...]:
    """Once per driver-side process, configuration and refresh period: Spark builds the
    writer for every batch, in more than one process. A broker restarting during a rolling
    upgrade must not fail a commit or an abort for a check that passed: when the brokers
    cannot be read, the last pass stands for another period. Only a pass is kept, so a process
    keeps one default timeout for all its batches until the brokers' maximum changes."""
    key = (bootstrap, producer, timing)
    last = _passed.get(key)
    if last is not None and time.monotonic() - last[0] < _CHECK_REFRESH_S:
        return last[1]
    config = dict(producer)
    security = {k: v for k, v in config.items() if k != "bootstrap.servers"}
    try:
        broker_config = read_cluster(bootstrap, [], options=security).broker_config
    except LiveClusterError:
        if last is None:
            raise
        _log.warning(
            "the brokers could not be read again; the last passed check stands for another "
            "%.0f s", _CHECK_REFRESH_S,
        )  # fmt: skip
        # Renewed: a broker down for long must not cost every batch the read's timeout.
        _passed[key] = (time.monotonic(), last[1])
        return last[1]
    checked = checked_sink_config(config, broker_config, timing)
    if checked != config and (last is None or dict(last[1]) != checked):
        _log.info(
            "option 'kafka.transaction.timeout.ms' is not set: the sink runs with %s, chosen "
            "from the brokers' transaction.max.timeout.ms", checked["transaction.timeout.ms"],
        )  # fmt: skip
    _passed[key] = (time.monotonic(), tuple(sorted(checked.items())))
    return _passed[key][1]
