"""The Spark side of batch writes: ``df.write.format("kafka-eos").mode("append").save()``.

A batch write is one checkpoint: checkpoint 0 of its ``checkpointLocation``, which holds one
write and no more. The protocol is the stream's (:mod:`connectors.spark.sink`), run once:

1. Driver, when Spark creates the writer: recovery of a decided write (R1: a run that died
   after its decision has its commits finished), then the refusal to write again where a
   write was decided (:class:`AlreadyWrittenError`), then the startup checks.
2. Each write task (executor): the end of its input is its barrier. It produces into one
   transaction on one of its task's transactional ids and pre-commits: flush, no commit.
3. Driver, ``commit(messages)`` once every task succeeded: ``TwoPhaseCommit.complete``: abort
   this write's lingering transactions (dead attempts, a crashed earlier run), verify every
   committable, write the decision, commit every transaction, confirm.
4. Driver, ``abort(messages)``: fence what the tasks left open, unless the write is decided.

Nothing is visible before step 3's decision: a job that fails before it leaves only open
transactions, which ``abort`` fences, or the transaction timeout aborts when the driver died,
or the rerun's commit sweeps. After the decision the write is complete whatever crashes: the
rerun commits what is left, and then refuses to write the rows a second time.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from checkpoint.crashpoints import CrashPoint, checkpoint_scope, crash_point
from checkpoint.errors import CheckpointCommitFailed, ConfigError, ReusedCheckpointId
from connectors.kafka.sink.commit_path import (
    BATCH_WRITE_ID,
    BATCH_WRITE_PLAN,
    already_written,
    batch_write_naming,
    exactly_once_protocol,
    first_unconfirmable,
)
from connectors.kafka.sink.errors import DecidedWrite, PreCommitLostError
from connectors.kafka.sink.options import ExactlyOnceOptions, SinkOptions
from connectors.kafka.sink.startup import startup_checks
from connectors.kafka.sink.tasks import with_schema_files
from connectors.spark.query_log import is_stream_checkpoint
from connectors.spark.sink import (
    KafkaCommitMessage,
    check_input_schema,
    committables_of,
    current_task,
    flush_task,
    pre_commit_task,
)
from connectors.spark.worker_heap import freeze_imported_heap

_log = logging.getLogger(__name__)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

    from checkpoint.model import Committable
    from checkpoint.two_phase_commit import TwoPhaseCommit
    from connectors.kafka.sink.committer import KafkaCommitter


def batch_writer(
    options: dict[str, str], schema: StructType, overwrite: bool
) -> DataSourceArrowWriter:
    """Pick the writer for the delivery guarantee, as :func:`~connectors.spark.sink.stream_writer`
    does for streams."""
    if overwrite:
        raise ConfigError(
            "kafka-eos cannot write in save mode 'overwrite': a Kafka topic is appended to, "
            "never replaced. Use .mode('append')"
        )
    sink = SinkOptions.parse(options, batch=True)
    check_input_schema(schema, sink.topic, avro={column.column for column in sink.avro})
    if sink.exactly_once is not None:
        return ExactlyOnceBatchWriter(sink, sink.exactly_once)
    return FlushingBatchWriter(sink)


class ExactlyOnceBatchWriter(DataSourceArrowWriter):
    """One two-phase commit across the job's tasks, with the driver as coordinator."""

    def __init__(self, sink: SinkOptions, exactly_once: ExactlyOnceOptions) -> None:
        location = exactly_once.checkpoint_location
        if is_stream_checkpoint(location):
            raise ConfigError(
                f"option 'checkpointLocation' = {location!r} is a streaming query's checkpoint "
                "(Spark's metadata file is there): give the batch write a location of its own"
            )
        self._sink = sink
        self._exactly_once = exactly_once
        self._naming = batch_write_naming(exactly_once)
        # This run's own plan: another run's decision at the location never passes for it.
        self._plan = f"{BATCH_WRITE_PLAN}{uuid.uuid4().hex}"
        protocol, committer = self._protocol()
        try:
            # Step 1: a decided write's commits first, even if the checks below fail.
            finished = protocol.recover_decided()
        except CheckpointCommitFailed as exc:
            raise first_unconfirmable(exc, BATCH_WRITE_ID) from exc
        finally:
            committer.close()
        if protocol.store.contains(BATCH_WRITE_ID):
            finished_now = BATCH_WRITE_ID in finished
            state = DecidedWrite.FINISHED_NOW if finished_now else DecidedWrite.COMMITTED
            raise already_written(protocol.store, location, state)
        self._sink = with_schema_files(startup_checks(sink))

    def _protocol(self) -> tuple[TwoPhaseCommit, KafkaCommitter]:
        return exactly_once_protocol(self._sink, self._exactly_once, self._naming)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaCommitMessage:
        """Step 2, in a task: produce, then pre-commit at the barrier (end of input)."""
        freeze_imported_heap()
        crash_point(CrashPoint.TASK_BEGIN, checkpoint_id=BATCH_WRITE_ID)
        _, partition, attempt, task_attempt_id = current_task()
        candidates = self._naming.slots(partition, attempt, task_attempt_id)
        return pre_commit_task(self._sink, BATCH_WRITE_ID, candidates, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Step 3, on the driver, once every task succeeded."""
        committables = committables_of(messages, BATCH_WRITE_ID)
        protocol, committer = self._protocol()
        try:
            crash_point(CrashPoint.DRIVER_BEFORE_DECISION, checkpoint_id=BATCH_WRITE_ID)
            with checkpoint_scope(BATCH_WRITE_ID):
                decision = protocol.complete(BATCH_WRITE_ID, committables, plan=self._plan)
            crash_point(CrashPoint.DRIVER_AFTER_COMMIT, checkpoint_id=BATCH_WRITE_ID)
            # No next batch sweeps for a batch write: an attempt Spark refused (speculation)
            # that opened its transaction after the sweep would hold readers until its timeout.
            self._sweep_after_commit(committer, decision.committables)
            committer.register_location(p for c in committables for p in c.partitions)
        except PreCommitLostError as exc:
            raise exc.in_batch_write() from exc
        except ReusedCheckpointId as exc:
            # Another run on this location decided first; complete() aborted this run's.
            location = self._exactly_once.checkpoint_location
            raise already_written(
                protocol.store, location, DecidedWrite.DECIDED_BY_ANOTHER_RUN
            ) from exc
        except CheckpointCommitFailed as exc:
            raise first_unconfirmable(exc, BATCH_WRITE_ID) from exc
        finally:
            committer.close()

    @staticmethod
    def _sweep_after_commit(committer: KafkaCommitter, decided: Sequence[Committable]) -> None:
        try:
            committer.abort_lingering(decided)
        except Exception:
            _log.warning("the sweep after the batch write's commit failed", exc_info=True)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Step 4, on the driver: fence what the tasks left open; a decided write is left for
        its rerun to commit."""
        protocol, committer = self._protocol()
        try:
            protocol.abort(
                BATCH_WRITE_ID, committables_of(messages, BATCH_WRITE_ID), reason="spark-abort"
            )
            # Spark calls abort() right after a commit() that raised. A decided write whose
            # commits failed has no restart to finish them, as a stream has: try once more now,
            # before its transactions age further.
            protocol.recover_decided()
        except CheckpointCommitFailed as exc:
            _log.warning(
                "the decided batch write at %s is not committed yet (%s): rerun the write on "
                "the same location soon, before its transactions time out, to finish it",
                self._exactly_once.checkpoint_location, exc,
            )  # fmt: skip
        finally:
            committer.close()


class FlushingBatchWriter(DataSourceArrowWriter):
    """``at_least_once`` and ``none``: each task flushes at its end, as Spark's own sink."""

    def __init__(self, sink: SinkOptions) -> None:
        self._sink = with_schema_files(sink)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return flush_task(self._sink, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Records are visible as soon as they are flushed."""

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Flushed records cannot be taken back; a rerun of the job writes them again."""
