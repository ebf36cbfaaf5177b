"""The sink's Avro columns never stand between a restart and the commit of its decided
batches: the writer commits them first, then reads schema files; a subject's latest schema is
asked for by the tasks only, never by the driver's commit or abort."""

from __future__ import annotations

import json

import pytest
from pyspark.sql.types import StringType, StructField, StructType

import connectors.spark.sink as spark_sink
from connectors.kafka.sink.errors import SinkOptionError
from connectors.kafka.sink.options import SinkOptions
from connectors.kafka.sink.tasks import with_schema_files

SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "x", "type": "string"}]}
COLUMNS = StructType([StructField("value", StructType([StructField("x", StringType())]))])


def options(tmp_path, **avro: str) -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": "127.0.0.1:9",
        "topic": "orders",
        "checkpointLocation": str(tmp_path / "checkpoint"),
        "valueFormat": "avro",
        **avro,
    }


@pytest.mark.parametrize(
    "avro",
    [
        # Nothing listens on port 9: a registry that is down when the query restarts.
        {"schema.registry.url": "http://127.0.0.1:9", "schema.registry.max.retries": "0"},
        {"valueSchemaFile": "/no/such/schema.avsc"},  # a schema file that moved
    ],
    ids=["registry-down", "schema-file-gone"],
)
def test_the_writer_is_built_whatever_the_avro_schema_source_says(
    tmp_path, monkeypatch, avro
) -> None:
    """Building ExactlyOnceStreamWriter is what commits decided batches (recovery)."""
    built = []
    monkeypatch.setattr(
        spark_sink, "ExactlyOnceStreamWriter", lambda sink, eo: built.append(sink) or sink
    )
    spark_sink.stream_writer(options(tmp_path, **avro), COLUMNS)
    assert len(built) == 1


def test_schema_files_are_read_on_the_driver_after_recovery(tmp_path) -> None:
    path = tmp_path / "r.avsc"
    path.write_text(json.dumps(SCHEMA))
    sink = SinkOptions.parse(options(tmp_path, valueSchemaFile=str(path)))
    assert sink.avro[0].schema is None, "not read while the options are parsed"
    read = with_schema_files(sink)
    assert read.avro[0].schema is not None and read.avro[0].schema_file is None
    path.unlink()
    with pytest.raises(SinkOptionError, match=r"valueSchemaFile=.*cannot read"):
        with_schema_files(sink)
