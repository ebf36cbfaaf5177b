"""Loading Avro schemas and the Arrow (Spark) types derived from them."""

from __future__ import annotations

import doctest
import json
from pathlib import Path

import pyarrow as pa
import pytest
from avro_samples import EVERY_TYPE, EXPECTED
from pyspark.sql.pandas.types import from_arrow_type

import connectors.avro.schema
import connectors.avro.wire
from connectors.avro.schema import AvroSchemaError, arrow_type, load_schema, physical


def test_every_type_of_the_issue_maps_to_its_spark_type() -> None:
    kind = arrow_type(load_schema(json.dumps(EVERY_TYPE)))
    assert kind == EXPECTED
    assert [f.nullable for f in kind] == [f.nullable for f in EXPECTED]


def test_spark_accepts_the_arrow_type() -> None:
    # As connectors.spark.source: NTZ for a naive timestamp, the default from PySpark 4.2 on.
    spark = from_arrow_type(
        arrow_type(load_schema(json.dumps(EVERY_TYPE))), prefer_timestamp_ntz=True
    )
    assert spark.simpleString().startswith("struct<id:bigint,qty:int,ok:boolean,ratio:float")
    assert "at_ms:timestamp,at_us:timestamp,local:timestamp_ntz" in spark.simpleString()
    assert "amount:decimal(10,2),tax:decimal(12,3),day:date" in spark.simpleString()


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ('"string"', pa.string()),
        ('["null", "long"]', pa.int64()),
        ('["float", "double", "null"]', pa.float64()),
        ('{"type": "array", "items": "int"}', pa.list_(pa.int32())),
        ('{"type": "long", "logicalType": "time-micros"}', pa.int64()),
        ('{"type": "long", "logicalType": "some-future-type"}', pa.int64()),
        ('{"type": "fixed", "name": "U", "size": 16, "logicalType": "duration"}', pa.binary()),
    ],
)
def test_a_top_level_value_that_is_no_record_keeps_its_type(schema: str, expected: pa.DataType):
    assert arrow_type(load_schema(schema)) == expected


def test_a_named_type_is_reused_by_name() -> None:
    schema = load_schema(
        json.dumps(
            {
                "type": "record",
                "name": "Pair",
                "fields": [
                    {"name": "a", "type": {"type": "fixed", "name": "Id", "size": 2}},
                    {"name": "b", "type": "Id"},
                    {"name": "c", "type": {"type": "array", "items": "Id"}},
                ],
            }
        )
    )
    assert arrow_type(schema) == pa.struct(
        [
            pa.field("a", pa.binary(), False),
            pa.field("b", pa.binary(), False),
            pa.field("c", pa.list_(pa.binary()), False),
        ]
    )


def test_a_recursive_record_is_refused_with_its_cycle() -> None:
    node = {
        "type": "record",
        "name": "Node",
        "fields": [
            {"name": "value", "type": "long"},
            {"name": "children", "type": {"type": "array", "items": "Node"}},
        ],
    }
    with pytest.raises(AvroSchemaError, match=r"recursive at children\[\] \(Node -> Node\)"):
        arrow_type(load_schema(json.dumps(node)))


def test_a_union_of_several_types_is_refused_naming_the_field() -> None:
    schema = {
        "type": "record",
        "name": "R",
        "fields": [{"name": "either", "type": ["null", "string", "long"]}],
    }
    with pytest.raises(AvroSchemaError, match=r"field either is a union of several non-null"):
        arrow_type(load_schema(json.dumps(schema)))


def test_a_decimal_wider_than_spark_is_refused() -> None:
    schema = '{"type": "bytes", "logicalType": "decimal", "precision": 40, "scale": 2}'
    with pytest.raises(AvroSchemaError, match="precision 40: Spark's decimals hold at most 38"):
        arrow_type(load_schema(schema))


def test_a_schema_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / "order.avsc"
    path.write_text(json.dumps(EVERY_TYPE))
    assert arrow_type(load_schema(path=path)) == EXPECTED


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"text": "{not json"}, r"the Avro schema text is not JSON .*\{not json"),
        ({"text": '{"type": "recrod"}'}, r"is not a valid Avro schema: .*recrod"),
        ({"text": '{"type": "record", "name": "R", "fields": [{"name": "a"}]}'}, "missing 'type'"),
        ({"path": "/no/such/order.avsc"}, r"cannot read the Avro schema file /no/such/order.avsc"),
        ({}, r"either as JSON text or as a file path"),
    ],
)
def test_a_bad_schema_is_a_clear_error(kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(AvroSchemaError, match=message) as raised:
        load_schema(**kwargs)
    assert raised.value.code == "KAFKA_EOS.AVRO.INVALID_SCHEMA"


def test_physical_drops_only_the_logical_types_without_an_arrow_type() -> None:
    schema = load_schema(json.dumps(EVERY_TYPE))
    kept = json.dumps(physical(schema))
    assert "uuid" not in kept and "time-millis" not in kept
    assert all(t in kept for t in ("decimal", "date", "timestamp-millis", "local-timestamp"))
    plain = load_schema('{"type": "long", "logicalType": "timestamp-millis"}')
    assert physical(plain) is plain


@pytest.mark.parametrize("module", [connectors.avro.schema, connectors.avro.wire])
def test_doc_examples_run(module: object) -> None:
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)  # type: ignore[arg-type]
    assert result.attempted > 0 and result.failed == 0
