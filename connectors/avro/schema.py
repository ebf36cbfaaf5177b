"""Avro schemas: load one, and derive the Arrow type that Spark reads as its column type.

The mapping follows Spark's ``from_avro`` (``SchemaConverters``), so a query that moves from
Spark's Avro functions to kafka-eos keeps its column types:

>>> import pyarrow as pa
>>> arrow_type(load_schema('["null", {"type": "long", "logicalType": "timestamp-millis"}]'))
TimestampType(timestamp[us, tz=UTC])
>>> arrow_type(load_schema('{"type": "map", "values": ["int", "long"]}'))
MapType(map<string, int64>)

Logical types Spark has no type for (``uuid``, ``time-millis``, ``time-micros``, and any
other) are read as their underlying Avro type: a uuid is its string, a time-millis the int of
milliseconds after midnight, as in Spark. :func:`physical` strips them from a schema so that
fastavro decodes straight into those values.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
from fastavro.schema import SchemaParseException, UnknownType

from checkpoint.errors import ConfigError

# fastavro's parsed form of a schema: a dict, a list (a union) or a str (a primitive or a name).
Schema = dict[str, Any] | list[Any] | str

# Logical types with an Arrow (and Spark) type of their own; every other one reads as its
# underlying Avro type.
_TIMESTAMP_UTC = pa.timestamp("us", tz="UTC")  # Spark's TimestampType in Arrow
_LOGICAL: dict[str, pa.DataType] = {
    "date": pa.date32(),
    "timestamp-millis": _TIMESTAMP_UTC,
    "timestamp-micros": _TIMESTAMP_UTC,
    "local-timestamp-millis": pa.timestamp("us"),  # Spark's TimestampNTZType
    "local-timestamp-micros": pa.timestamp("us"),
}
_PRIMITIVE: dict[str, pa.DataType] = {
    "null": pa.null(),
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
}
# Spark's from_avro reads these two unions as the wider type; other unions of several
# non-null types it reads as struct<member0, member1, ...>, which kafka-eos refuses.
_WIDENED = {frozenset({"int", "long"}): "long", frozenset({"float", "double"}): "double"}
_MAX_DECIMAL_PRECISION = 38  # Spark's DecimalType and Arrow's decimal128


class AvroSchemaError(ConfigError):
    """An Avro schema cannot be read (not JSON, not Avro, no such file), or has a type Spark
    cannot represent (a recursive type, a union of several non-null types)."""

    code = "KAFKA_EOS.AVRO.INVALID_SCHEMA"


def load_schema(text: str | None = None, path: str | Path | None = None) -> Schema:
    """The schema in ``text`` (its JSON) or in the file at ``path``, parsed by fastavro."""
    if (text is None) == (path is None):
        raise AvroSchemaError("give an Avro schema either as JSON text or as a file path, not both")
    where = "the Avro schema text"
    if path is not None:
        where = f"the Avro schema file {path}"
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise AvroSchemaError(
                f"cannot read {where}: {exc}. Give the path of a readable .avsc file, as seen "
                "from the driver and every executor, or give the schema as JSON text"
            ) from exc
    assert text is not None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise AvroSchemaError(
            f"{where} is not JSON ({exc}): {_preview(text)}. An Avro schema is JSON, e.g. "
            '{"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}'
        ) from exc
    return parse(raw, where)


def parse(raw: Any, where: str = "the Avro schema") -> Schema:
    """``raw`` (a schema as JSON values) parsed by fastavro; errors name ``where`` it came from."""
    try:
        return fastavro.parse_schema(raw)
    except (SchemaParseException, UnknownType, TypeError, ValueError, KeyError) as exc:
        raise AvroSchemaError(
            f"{where} is not a valid Avro schema: {type(exc).__name__}: {exc}. Seen: "
            f"{_preview(json.dumps(raw))}. Check it against the Avro specification "
            "(https://avro.apache.org/docs/current/specification/)"
        ) from exc


def arrow_type(schema: Schema, *, required_items: bool = False) -> pa.DataType:
    """The Arrow type of the values of ``schema``, as Spark's ``from_avro`` types them.

    ``required_items``: list items and map values are nullable only where the schema says
    so (what the encoder checks before writing); Spark's types keep them nullable.

    A record gives a struct; the Spark adapter makes it the column's struct type. Any other
    top-level type (``"string"``, ``["null", "long"]``, an array, ...) gives that type, and the
    adapter reads it as one column of that type, as ``from_avro`` does; the column is nullable
    either way, since a null Kafka value decodes to null.

    ========================================  ==========================================
    Avro                                      Arrow (Spark)
    ========================================  ==========================================
    record                                    struct, fields in order (StructType)
    array / map                               list / map<string, T>
    ``["null", T]`` or ``[T, "null"]``        T, nullable
    ``["int", "long"]``, ``["float", ...]``   int64 / float64 (Spark widens them too)
    enum, string, uuid                        string
    bytes, fixed                              binary
    int, time-millis / long, time-micros      int32 / int64
    float / double / boolean                  float32 / float64 / bool
    decimal (bytes or fixed)                  decimal128(precision, scale)
    date                                      date32
    timestamp-millis / -micros                timestamp[us, UTC] (TimestampType)
    local-timestamp-millis / -micros          timestamp[us] (TimestampNTZType)
    ========================================  ==========================================

    Refused with :class:`AvroSchemaError`: a recursive record (Spark types are finite), a
    union of several non-null types other than the two widened ones, a decimal over 38 digits.
    """
    return _ArrowTyper(required_items).type_of(schema, "the top-level value")


class _ArrowTyper:
    """One walk over a parsed schema, which names each named type once it is defined (Avro
    defines a name before any use of it) and knows which records are being expanded."""

    def __init__(self, required_items: bool = False) -> None:
        self._required_items = required_items
        self._named: dict[str, dict[str, Any]] = {}
        self._open: list[str] = []  # records being expanded, outermost first

    def type_of(self, schema: Schema, at: str) -> pa.DataType:
        if isinstance(schema, list):
            return self._union(schema, at)[0]
        if isinstance(schema, str):
            return self._name(schema, at)
        kind = schema["type"]
        if not isinstance(kind, str) or kind in self._named:
            return self.type_of(kind, at)
        if kind in ("enum", "fixed"):
            self._named[schema["name"]] = schema
        logical = schema.get("logicalType")
        if logical in _LOGICAL and kind in ("int", "long"):
            return _LOGICAL[logical]
        if logical == "decimal" and kind in ("bytes", "fixed"):
            return _decimal(schema, at)
        if kind == "record":
            return self._record(schema, at)
        if kind in ("enum", "fixed"):
            return pa.string() if kind == "enum" else pa.binary()
        if kind == "array":
            return pa.list_(self._item("item", schema["items"], f"{at}[]"))
        if kind == "map":
            return pa.map_(pa.string(), self._item("value", schema["values"], f"{at}{{}}"))
        return self._name(kind, at)

    def _item(self, name: str, schema: Schema, at: str) -> pa.DataType | pa.Field:
        kind, nullable = self._union(schema, at)
        return pa.field(name, kind, nullable=nullable) if self._required_items else kind

    def _name(self, name: str, at: str) -> pa.DataType:
        if name in _PRIMITIVE:
            return _PRIMITIVE[name]
        if name in self._open:
            cycle = " -> ".join([*self._open[self._open.index(name) :], name])
            raise AvroSchemaError(
                f"the Avro schema is recursive at {at} ({cycle}): Spark's types are finite, so "
                "a recursive record has no Spark type. Give a reader schema that cuts the "
                "recursion (e.g. the nested field as bytes, or a fixed depth of records)"
            )
        return self.type_of(self._named[name], at)

    def _record(self, schema: dict[str, Any], at: str) -> pa.DataType:
        name = schema["name"]
        self._named[name] = schema
        self._open.append(name)
        fields = []
        for field in schema["fields"]:
            where = field["name"] if at == "the top-level value" else f"{at}.{field['name']}"
            kind, nullable = self._union(field["type"], where)
            fields.append(pa.field(field["name"], kind, nullable=nullable))
        self._open.pop()
        return pa.struct(fields)

    def _union(self, schema: Schema, at: str) -> tuple[pa.DataType, bool]:
        """The type of a field's schema and whether it is nullable (a union with null)."""
        if not isinstance(schema, list):
            return self.type_of(schema, at), schema == "null"
        branches = [b for b in schema if b != "null"]
        nullable = len(branches) < len(schema)
        if not branches:
            return pa.null(), True
        widened = _WIDENED.get(frozenset(b for b in branches if isinstance(b, str)))
        if len(branches) == 2 and widened:
            return _PRIMITIVE[widened], nullable
        if len(branches) != 1:
            raise AvroSchemaError(
                f"field {at} is a union of several non-null types {_preview(json.dumps(schema))}:"
                " kafka-eos reads only unions of one type with null, [int, long] and "
                "[float, double]. Give a reader schema with one of those (Spark's from_avro "
                "would read it as struct<member0, member1, ...>, which kafka-eos does not)"
            )
        return self.type_of(branches[0], at), nullable


def _decimal(schema: dict[str, Any], at: str) -> pa.DataType:
    precision, scale = schema["precision"], schema.get("scale", 0)
    if precision > _MAX_DECIMAL_PRECISION:
        raise AvroSchemaError(
            f"field {at} is a decimal of precision {precision}: Spark's decimals hold at most "
            f"{_MAX_DECIMAL_PRECISION} digits. Give a reader schema with a smaller precision, or "
            "the field as plain bytes"
        )
    return pa.decimal128(precision, scale)


def physical(schema: Schema) -> Schema:
    """``schema`` without the logical types that have no Arrow type of their own (uuid,
    time-*, any unknown one), parsed anew: fastavro then reads and writes exactly the Python
    values that ``pa.array`` takes for :func:`arrow_type` and that ``to_pylist`` gives back,
    with no conversion per record. The schema itself when it has none of them."""
    stripped = _strip(schema)
    return schema if stripped == plain(schema) else fastavro.parse_schema(stripped)


def plain(schema: Schema) -> Any:
    """``schema`` as plain JSON values, without fastavro's bookkeeping: what ``json.dumps``
    sends to a schema registry."""
    return _strip(schema, keep_all=True)


def _strip(schema: Any, keep_all: bool = False) -> Any:
    """A plain copy of a parsed schema: no fastavro keys, and (unless ``keep_all``) no logical
    type outside those with an Arrow type."""
    if isinstance(schema, list):
        return [_strip(b, keep_all) for b in schema]
    if not isinstance(schema, dict):
        return schema

    def keep(key: str, value: Any) -> bool:
        if key.startswith("__"):
            return False
        return keep_all or key != "logicalType" or value in _LOGICAL or value == "decimal"

    out = {k: v for k, v in schema.items() if keep(k, v)}
    for key in ("type", "items", "values"):
        if key in out:
            out[key] = _strip(out[key], keep_all)
    if "fields" in out:
        out["fields"] = [{**f, "type": _strip(f["type"], keep_all)} for f in out["fields"]]
    return out


def _preview(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"
