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

from checkpoint.errors import ConfigError
from checkpoint.model import Snapshot
from checkpoint.store import SnapshotStore
from connectors.kafka.sink.options import SinkOptionError, SinkOptions
from connectors.spark.batch_sink import ExactlyOnceBatchWriter, batch_writer
from connectors.spark.sink import BATCH_WRITE_PLAN, refuse_batch_write_location

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
