"""Decoding Kafka values into Arrow and encoding Arrow into Kafka values (no Kafka, no
registry server: raw Avro, and the wire format through a writer schema cached per id)."""

from __future__ import annotations

import io
import json
import pickle
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from avro_samples import EVERY_TYPE, EXPECTED, order

from connectors.avro import wire
from connectors.avro.codec import AvroDecodeError, AvroDecoder, AvroEncodeError, AvroEncoder
from connectors.avro.registry import RegistryError, SchemaRegistry
from connectors.avro.schema import AvroSchemaError, load_schema

ORDER = load_schema(json.dumps(EVERY_TYPE))


def where(i: int) -> str:
    return f"topic orders partition 3 offset {1234 + i}"


def schema(*fields: dict[str, Any], name: str = "R") -> Any:
    return load_schema(json.dumps({"type": "record", "name": name, "fields": list(fields)}))


def avro(value: Any, writer: Any) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, writer, value)
    return buf.getvalue()


def decode(values: list[bytes | None], reader: Any, **kwargs: Any) -> list[Any]:
    array, corrupt = AvroDecoder(reader, **kwargs).decode_column(
        values, permissive=False, where=where
    )
    assert corrupt == [None] * len(values)
    return array.to_pylist()


def test_every_type_round_trips_through_the_encoder_and_the_decoder() -> None:
    rows = [order(i) for i in range(7)]
    column = pa.array([*rows, None], type=EXPECTED)
    values = AvroEncoder(ORDER).encode_column(column)
    assert values[-1] is None and all(isinstance(v, bytes) for v in values[:-1])
    decoded, corrupt = AvroDecoder(ORDER).decode_column(values, permissive=False, where=where)
    assert decoded.type == EXPECTED
    assert decoded.to_pylist() == column.to_pylist()
    assert corrupt == [None] * 8


def test_the_decoder_reads_what_another_avro_writer_wrote() -> None:
    rows = [order(i) for i in range(3)]
    for row in rows:  # fastavro takes maps as dicts
        row["counts"] = dict(row["counts"])
        for line in row["lines"]:
            line["scores"] = dict(line["scores"])
    values = [avro(row, ORDER) for row in rows]
    expected = pa.array([order(i) for i in range(3)], type=EXPECTED).to_pylist()
    assert decode(values, ORDER) == expected


def test_a_primitive_schema_gives_a_column_of_its_type() -> None:
    text = load_schema('["null", "string"]')
    values = AvroEncoder(text).encode_column(pa.array(["a", None, "ü"]))
    array, _ = AvroDecoder(text).decode_column(values, permissive=False, where=where)
    assert (array.type, array.to_pylist()) == (pa.string(), ["a", None, "ü"])


# Evolution: the writer's schema resolved against the reader's.


def test_a_field_the_reader_adds_takes_its_default() -> None:
    writer = schema({"name": "id", "type": "long"})
    reader = schema(
        {"name": "id", "type": "long"},
        {"name": "region", "type": "string", "default": "eu"},
        {"name": "note", "type": ["null", "string"], "default": None},
    )
    values = [avro({"id": 1}, writer)]
    assert decode(values, reader, writer_schema=writer) == [{"id": 1, "region": "eu", "note": None}]


def test_a_field_the_reader_drops_is_skipped() -> None:
    writer = schema({"name": "id", "type": "long"}, {"name": "gone", "type": "string"})
    reader = schema({"name": "id", "type": "long"})
    values = [avro({"id": 7, "gone": "x" * 50}, writer)]
    assert decode(values, reader, writer_schema=writer) == [{"id": 7}]


def test_an_int_is_promoted_to_a_long() -> None:
    writer = schema({"name": "n", "type": "int"})
    reader = schema({"name": "n", "type": "long"})
    array, _ = AvroDecoder(reader, writer_schema=writer).decode_column(
        [avro({"n": -5}, writer)], permissive=False, where=where
    )
    assert array.type.field("n").type == pa.int64()
    assert array.to_pylist() == [{"n": -5}]


def test_an_unknown_enum_symbol_reads_as_the_readers_default() -> None:
    enum = {"type": "enum", "name": "S", "symbols": ["NEW", "DONE", "LOST"]}
    writer = schema({"name": "s", "type": enum})
    reader = schema({"name": "s", "type": {**enum, "symbols": ["NEW", "DONE"], "default": "NEW"}})
    values = [avro({"s": "LOST"}, writer), avro({"s": "DONE"}, writer)]
    assert decode(values, reader, writer_schema=writer) == [{"s": "NEW"}, {"s": "DONE"}]


def test_a_writer_the_reader_cannot_resolve_is_a_schema_error_in_any_mode() -> None:
    writer = schema({"name": "n", "type": "string"})
    reader = schema({"name": "n", "type": "long"})
    decoder = AvroDecoder(reader, writer_schema=writer)
    with pytest.raises(AvroSchemaError, match=r"offset 1234 cannot be read with the reader"):
        decoder.decode_column([avro({"n": "x"}, writer)], permissive=True, where=where)


# Malformed values: FAILFAST and PERMISSIVE.

LONGS = schema({"name": "id", "type": "long"}, {"name": "name", "type": "string"})
GOOD = avro({"id": 1, "name": "ok"}, LONGS)
TRUNCATED = GOOD[:-1]
TRAILING = GOOD + b"\x00"


@pytest.mark.parametrize(
    ("bad", "seen"),
    [(TRUNCATED, "EOFError"), (TRAILING, "1 of its 5 bytes are left after the datum")],
)
def test_failfast_names_the_record_what_failed_and_the_fix(bad: bytes, seen: str) -> None:
    with pytest.raises(AvroDecodeError) as raised:
        AvroDecoder(LONGS).decode_column([GOOD, None, bad], permissive=False, where=where)
    text = str(raised.value)
    assert text.startswith("[KAFKA_EOS.AVRO.MALFORMED_RECORD] malformed Avro value at topic ")
    assert "topic orders partition 3 offset 1236" in text and seen in text
    assert "mode=PERMISSIVE" in text and "reader schema option" in text
    assert pickle.loads(pickle.dumps(raised.value)).where == where(2)


def test_permissive_gives_null_and_the_raw_bytes() -> None:
    values = [GOOD, TRUNCATED, None, TRAILING, b""]
    array, corrupt = AvroDecoder(LONGS).decode_column(values, permissive=True, where=where)
    assert array.to_pylist() == [{"id": 1, "name": "ok"}, None, None, None, None]
    assert corrupt == [None, TRUNCATED, None, TRAILING, b""]


def test_a_value_arrow_refuses_is_malformed_too() -> None:
    """A writer decimal wider than the reader's: fastavro reads it, Arrow cannot hold it."""
    wide = {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 2}
    writer = schema({"name": "d", "type": wide})
    reader = schema({"name": "d", "type": {**wide, "precision": 4}})
    from decimal import Decimal

    values = [avro({"d": Decimal("1.50")}, writer), avro({"d": Decimal("123456.78")}, writer)]
    decoder = AvroDecoder(reader, writer_schema=writer)
    array, corrupt = decoder.decode_column(values, permissive=True, where=where)
    assert array.to_pylist() == [{"d": Decimal("1.50")}, None] and corrupt == [None, values[1]]
    with pytest.raises(AvroDecodeError, match=r"offset 1235: its value does not fit"):
        decoder.decode_column(values, permissive=False, where=where)


# The Confluent wire format, with the registry's cache already holding the writer schema.


def registry_knowing(schema_id: int, writer: Any) -> SchemaRegistry:
    registry = SchemaRegistry({"schema.registry.url": "http://127.0.0.1:1"})
    registry._by_id[schema_id] = writer  # no server in unit tests: the id's schema is cached
    return registry


def test_framed_values_are_decoded_with_the_writer_schema_of_their_id() -> None:
    writer = schema({"name": "id", "type": "int"})
    reader = schema({"name": "id", "type": "long"}, {"name": "v", "type": "int", "default": 3})
    values = [wire.frame(42, avro({"id": 5}, writer)), None]
    assert decode(values, reader, registry=registry_knowing(42, writer)) == [
        {"id": 5, "v": 3},
        None,
    ]


def test_a_value_without_the_wire_header_is_malformed() -> None:
    decoder = AvroDecoder(LONGS, registry=registry_knowing(1, LONGS))
    raw = GOOD  # no magic byte: written without a registry
    with pytest.raises(AvroDecodeError, match=r"offset 1234: WireFormatError: .*magic byte"):
        decoder.decode_column([raw], permissive=False, where=where)
    array, corrupt = decoder.decode_column([raw, b"\x00\x00"], permissive=True, where=where)
    assert array.to_pylist() == [None, None] and corrupt == [raw, b"\x00\x00"]


def test_framed_encoding_puts_the_registered_id_in_front() -> None:
    registry = registry_knowing(9, LONGS)
    encoder = AvroEncoder(LONGS, registry=registry, subject="orders-value")
    encoder._header = wire.frame(9, b"")  # what register() gives; a real server is tested apart
    values = encoder.encode_column(pa.array([{"id": 1, "name": "ok"}], type=_type(LONGS)))
    assert values == [wire.frame(9, GOOD)]


def _type(schema: Any) -> pa.DataType:
    return AvroEncoder(schema).arrow_type


# The encoder's refusals.


def test_a_row_that_does_not_fit_names_its_row_and_field() -> None:
    nested = schema(
        {"name": "id", "type": "long"},
        {
            "name": "customer",
            "type": {"type": "record", "name": "C", "fields": [{"name": "zip", "type": "int"}]},
        },
    )
    loose = pa.struct([("id", pa.int64()), ("customer", pa.struct([("zip", pa.int32())]))])
    column = pa.array([{"id": 1, "customer": {"zip": 1}}, {"id": 2, "customer": {"zip": None}}])
    with pytest.raises(AvroEncodeError) as raised:
        AvroEncoder(nested).encode_column(column.cast(loose))
    text = str(raised.value)
    assert text.startswith("[KAFKA_EOS.AVRO.VALUE_DOES_NOT_FIT] field customer.zip of row 1 is")
    assert "null, but the Avro schema requires a value there" in text


BOOLS = schema(
    {"name": "ok", "type": "boolean"},
    {"name": "flags", "type": {"type": "array", "items": "boolean"}},
    {"name": "by", "type": {"type": "map", "values": "boolean"}},
)


@pytest.mark.parametrize(
    ("row", "where"),
    [
        ({"ok": None, "flags": [], "by": {}}, "field ok of row 1"),
        ({"ok": True, "flags": [True, None], "by": {}}, "an item of list flags"),
        ({"ok": True, "flags": [], "by": {"a": None}}, "a value of map by"),
    ],
    ids=["field", "list-item", "map-value"],
)
def test_a_null_where_the_schema_requires_a_boolean_is_refused(row, where) -> None:
    """fastavro would write it as false: a value changed without a word."""
    loose = pa.struct(
        [
            ("ok", pa.bool_()),
            ("flags", pa.list_(pa.bool_())),
            ("by", pa.map_(pa.string(), pa.bool_())),
        ]
    )
    good = {"ok": True, "flags": [True], "by": {"a": False}}
    column = pa.array([good, row], loose)
    with pytest.raises(AvroEncodeError, match=rf"{where} is null, but the Avro schema requires"):
        AvroEncoder(BOOLS).encode_column(column)


@pytest.mark.parametrize(
    ("avro_type", "arrow_type", "value"),
    [
        ("float", pa.float64(), 1e300),  # would be inf
        (
            {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2},
            pa.float64(),
            1.239,
        ),
        (
            {"type": "int", "logicalType": "date"},
            pa.timestamp("us", tz="UTC"),
            1_700_000_000_000_000,
        ),
        ("int", pa.string(), "12"),
        ("string", pa.int64(), 12),
        ({"type": "long", "logicalType": "timestamp-millis"}, pa.timestamp("us"), 0),
    ],
    ids=[
        "double-to-float",
        "double-to-decimal",
        "timestamp-to-date",
        "text-to-int",
        "int-to-text",
        "naive-to-utc",
    ],
)
def test_a_column_whose_values_would_change_is_refused(avro_type, arrow_type, value) -> None:
    """Rounding, cutting or reinterpreting a value silently is worse than failing the batch."""
    column = pa.array([{"x": value}], pa.struct([("x", arrow_type)]))
    with pytest.raises(AvroEncodeError, match=r"field x is a .*: cast it in Spark first"):
        AvroEncoder(schema({"name": "x", "type": avro_type})).encode_column(column)


def test_an_enum_symbol_outside_the_schema_is_refused() -> None:
    enum = schema({"name": "s", "type": {"type": "enum", "name": "S", "symbols": ["A"]}})
    with pytest.raises(AvroEncodeError, match=r"row 1 does not fit .* field R.s is a str"):
        AvroEncoder(enum).encode_column(pa.array([{"s": "A"}, {"s": "Z"}]))


def test_a_value_too_wide_for_the_schema_names_its_row() -> None:
    ints = schema({"name": "n", "type": "int"})
    column = pa.array([{"n": 1}, {"n": 2**40}], type=pa.struct([("n", pa.int64())]))
    with pytest.raises(AvroEncodeError, match=r"row 1 does not fit the Avro schema's type"):
        AvroEncoder(ints).encode_column(column)


def test_a_column_of_another_shape_is_refused_naming_both_types() -> None:
    with pytest.raises(AvroEncodeError, match=r"a column of type struct<other: int64> does not"):
        AvroEncoder(LONGS).encode_column(pa.array([{"other": 1}]))


def test_a_nested_field_of_another_type_is_named() -> None:
    inner = {"type": "record", "name": "C", "fields": [{"name": "b", "type": "bytes"}]}
    nested = schema({"name": "c", "type": inner})
    with pytest.raises(AvroEncodeError, match=r"field c.b is a int64, the schema's binary"):
        AvroEncoder(nested).encode_column(pa.array([{"c": {"b": 1}}]))


def test_a_column_in_another_time_zone_or_width_is_cast() -> None:
    ts = schema({"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}})
    utc = pa.timestamp("us", tz="UTC")
    column = pa.array([{"at": 1_700_000_000_000_000}], pa.struct([("at", utc)]))
    paris = column.cast(pa.struct([("at", pa.timestamp("us", tz="Europe/Paris"))]))
    values = AvroEncoder(ts).encode_column(paris)
    assert decode(values, ts) == pa.array(column.to_pylist(), _type(ts)).to_pylist()


def test_codecs_pickle_for_the_executors() -> None:
    encoder = pickle.loads(pickle.dumps(AvroEncoder(ORDER)))
    decoder = pickle.loads(pickle.dumps(AvroDecoder(ORDER)))
    column = pa.array([order(1)], type=EXPECTED)
    array, _ = decoder.decode_column(encoder.encode_column(column), permissive=False, where=where)
    assert array.to_pylist() == column.to_pylist()


def test_a_decoder_takes_a_writer_schema_or_a_registry_not_both() -> None:
    with pytest.raises(AvroSchemaError, match="not both"):
        AvroDecoder(LONGS, writer_schema=LONGS, registry=registry_knowing(1, LONGS))
    with pytest.raises(AvroSchemaError, match="both a schema registry and the subject"):
        AvroEncoder(LONGS, subject="orders-value")


def test_a_registry_that_cannot_answer_fails_even_a_permissive_read() -> None:
    """Nothing listens on port 1: every framed value would otherwise read as corrupt."""
    unreachable = SchemaRegistry(
        {"schema.registry.url": "http://127.0.0.1:1", "schema.registry.max.retries": "0"}
    )
    framed = wire.frame(7, avro({"id": 1, "name": "ok"}, LONGS))
    decoder = AvroDecoder(LONGS, registry=unreachable)
    with pytest.raises(RegistryError, match=r"schema id 7"):
        decoder.decode_column([framed], permissive=True, where=where)
