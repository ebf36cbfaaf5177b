"""Batch writes (``df.write.format("kafka-eos")``): what is refused before any Kafka call.

A location holds one batch write, decided as checkpoint 0 under a plan of its own; a stream
must never take that decision for its own batch 0, and a batch write must never start on a
stream's checkpoint. The protocol itself is the stream's, tested on real Kafka in
``integration_tests/sink/test_batch_writes.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql.types import StringType, StructField, StructType

import connectors.spark.batch_sink as batch_sink
from checkpoint.errors import CheckpointCommitFailed, ConfigError
from checkpoint.model import Committable, Snapshot
from checkpoint.store import SnapshotStore
from checkpoint.testing import InMemoryBroker, InMemoryParticipant, TransactionState
from checkpoint.two_phase_commit import TwoPhaseCommit
from connectors.kafka.sink.commit_path import (
    BATCH_WRITE_PLAN,
    batch_write_naming,
    refuse_batch_write_location,
)
from connectors.kafka.sink.errors import (
    AlreadyWrittenError,
    DecidedWrite,
    PreCommitLostError,
    SinkOptionError,
)
from connectors.kafka.sink.naming import named_for_prefix
from connectors.kafka.sink.options import ExactlyOnceOptions, SinkOptions
from connectors.spark.batch_sink import ExactlyOnceBatchWriter, batch_writer
from connectors.spark.sink import KafkaCommitMessage

VALUES = StructType([StructField("value", StringType())])


def _options(location: Path | None = None, **more: str) -> dict[str, str]:
    options = {"kafka.bootstrap.servers": "127.0.0.1:9", "topic": "out", **more}
    if location is not None:
        options["checkpointLocation"] = str(location)
    return options


def test_overwrite_is_refused_as_sparks_sink_refuses_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"overwrite.*\.mode\('append'\)"):
        batch_writer(_options(tmp_path), VALUES, overwrite=True)


def test_exactly_once_without_a_location_says_where_the_decision_lives() -> None:
    with pytest.raises(SinkOptionError) as raised:
        SinkOptions.parse(_options(), batch=True)
    message = str(raised.value)
    assert "checkpointLocation" in message and ".write.option('checkpointLocation'" in message
    assert "at_least_once" in message


def test_at_least_once_needs_no_location() -> None:
    writer = batch_writer(_options(deliveryGuarantee="at_least_once"), VALUES, overwrite=False)
    assert type(writer).__name__ == "FlushingBatchWriter"


def test_a_streaming_checkpoint_is_refused_before_any_kafka_call(tmp_path: Path) -> None:
    (tmp_path / "metadata").write_text('{"id":"0b6d0c4e-1f57-4f4e-9a4e-0f2b8c1d7e10"}')
    sink = SinkOptions.parse(_options(tmp_path), batch=True)
    assert sink.exactly_once is not None
    with pytest.raises(ConfigError, match="streaming query's checkpoint"):
        ExactlyOnceBatchWriter(sink, sink.exactly_once)


@pytest.mark.parametrize(
    ("plan", "refused"),
    [(f"{BATCH_WRITE_PLAN}0f2b8c1d", True), ("sha256:0f2b8c1d", False), (None, False)],
)
def test_a_stream_never_takes_a_batch_writes_decision_for_its_batch_0(
    tmp_path: Path, plan: str | None, refused: bool
) -> None:
    store = SnapshotStore(str(tmp_path / "kafka-eos-sink"))
    store.write(Snapshot(0, "prefix", plan=plan))
    if refused:
        with pytest.raises(ConfigError, match="holds the decision of a batch write"):
            refuse_batch_write_location(store, str(tmp_path))
    else:
        refuse_batch_write_location(store, str(tmp_path))


def test_a_batch_write_names_its_ids_apart_from_the_streams_of_its_prefix(
    tmp_path: Path,
) -> None:
    """A backfill that copies a stream's transactionalIdPrefix must not be the stream's
    foreign owner (its sweep would fail the stream); its reruns share one owner."""
    naming = batch_write_naming(ExactlyOnceOptions(str(tmp_path), "orders"))
    transactional_id = naming.transactional_id(3, 1)
    assert not named_for_prefix("orders", transactional_id)
    assert named_for_prefix("orders-batch", transactional_id)
    rerun = batch_write_naming(ExactlyOnceOptions(f"file://{tmp_path}/", "orders"))
    assert rerun == naming


class _Committer(InMemoryParticipant):
    """The in-memory reference committer, with what the batch writer also calls on Kafka's;
    its first ``failing_commits`` commits fail, as EndTxns past their deadline do."""

    def __init__(self, broker: InMemoryBroker, failing_commits: int = 0) -> None:
        super().__init__(broker, "orders")
        self.failing_commits = failing_commits

    def commit(self, committable: Committable) -> None:
        if self.failing_commits:
            self.failing_commits -= 1
            raise TimeoutError(f"EndTxn of {committable.transactional_id} timed out")
        super().commit(committable)

    def register_location(self, partitions: object) -> None:
        list(partitions)  # type: ignore[call-overload]

    def close(self) -> None:
        pass


def _writer_over(
    store: SnapshotStore, committer: _Committer, monkeypatch: pytest.MonkeyPatch
) -> ExactlyOnceBatchWriter:
    """A batch writer whose driver calls run over ``store`` and ``committer`` (its constructor
    reads Kafka, so it is skipped: the state it would set is set here)."""
    protocol = TwoPhaseCommit(store, committer, pipeline_id="orders", sweeps_lingering=True)
    monkeypatch.setattr(batch_sink, "exactly_once_protocol", lambda *_: (protocol, committer))
    writer = object.__new__(ExactlyOnceBatchWriter)
    writer._sink = writer._naming = None  # type: ignore[assignment]  # the patched protocol's
    writer._exactly_once = ExactlyOnceOptions(str(store.location), "orders")
    writer._plan = f"{BATCH_WRITE_PLAN}this-run"
    return writer


def _pre_committed(broker: InMemoryBroker, name: str, rows: int) -> Committable:
    task = InMemoryParticipant(broker, f"orders-{name}")
    task.begin_transaction(0)
    for row in range(rows):
        task.write(0, f"{name}-{row}")
    return task.pre_commit(0)


def test_a_run_that_loses_the_race_to_another_run_of_its_write_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two runs on one location: the other run decided first. This run must neither commit
    its rows nor send the operator to another location (ReusedCheckpointId's advice for a
    stream), which would write the rows twice."""
    broker, store = InMemoryBroker(), SnapshotStore(str(tmp_path / "kafka-eos-sink"))
    other = _pre_committed(broker, "other", 2)
    TwoPhaseCommit(store, _Committer(broker), pipeline_id="orders").complete(
        0, [other], plan=f"{BATCH_WRITE_PLAN}other-run"
    )
    ours = _pre_committed(broker, "ours", 2)
    writer = _writer_over(store, _Committer(broker), monkeypatch)
    with pytest.raises(AlreadyWrittenError) as raised:
        writer.commit([KafkaCommitMessage(0, ours)])
    assert raised.value.state is DecidedWrite.DECIDED_BY_ANOTHER_RUN
    assert "another location" in str(raised.value)
    assert broker.visible == ["other-0", "other-1"]
    assert broker.state_of(ours.key) is TransactionState.ABORTED


def test_spark_s_abort_after_a_failed_commit_finishes_the_decided_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch write has no restart that would finish a decided write whose commits failed:
    the abort() that Spark calls right after the commit() tries once more."""
    broker, store = InMemoryBroker(), SnapshotStore(str(tmp_path / "kafka-eos-sink"))
    ours = _pre_committed(broker, "ours", 3)
    committer = _Committer(broker, failing_commits=1)
    writer = _writer_over(store, committer, monkeypatch)
    message = KafkaCommitMessage(0, ours)
    with pytest.raises(CheckpointCommitFailed):
        writer.commit([message])
    assert store.contains(0) and not store.is_confirmed(0) and broker.visible == []
    writer.abort([message])
    assert broker.visible == ["ours-0", "ours-1", "ours-2"]
    assert store.is_confirmed(0)


def test_a_write_that_outlives_its_transactions_says_what_a_batch_write_can_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The verify refuses a transaction near its timeout before anything is decided; for a
    batch write the advice is its own (no replay, no trigger or maxOffsetsPerTrigger)."""
    broker, store = InMemoryBroker(), SnapshotStore(str(tmp_path / "kafka-eos-sink"))
    ours = _pre_committed(broker, "ours", 1)
    committer = _Committer(broker)

    def too_old(checkpoint_id: int, committables: object) -> None:
        raise PreCommitLostError(checkpoint_id, ours.transactional_id, "3.0 s left")

    monkeypatch.setattr(committer, "verify", too_old)
    with pytest.raises(PreCommitLostError) as raised:
        _writer_over(store, committer, monkeypatch).commit([KafkaCommitMessage(0, ours)])
    message = str(raised.value)
    assert message.startswith("[KAFKA_EOS.SINK.PRE_COMMIT_LOST] batch write:")
    assert "replays" not in message and "same checkpointLocation" in message
    assert not store.contains(0) and broker.visible == []
