"""Kafka values to one Arrow column and back, through fastavro.

Decoding resolves each value's writer schema against the reader schema (Avro's schema
evolution: added fields with defaults, removed fields, promoted numbers, enum defaults). The
writer schema is given (raw Avro) or named by the value's id (the Confluent wire format, asked
of a schema registry). fastavro reads the :func:`~connectors.avro.schema.physical` schemas, so
its values are what ``pa.array`` takes for the column's type as they are: a uuid its string, a
map a dict, a timestamp an aware datetime. No walk over a decoded value.

Encoding writes each row of an Arrow column with the schema; maps are the only values that
need converting (``to_pylist`` gives them as lists of pairs, fastavro takes dicts).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from fastavro import schemaless_reader, schemaless_writer
from fastavro.read import SchemaResolutionError
from fastavro.validation import ValidationError, validate

from checkpoint.errors import KafkaEosError
from connectors.avro import wire
from connectors.avro.registry import RegistryError, SchemaRegistry
from connectors.avro.schema import AvroSchemaError, Schema, arrow_type, physical, plain

_FIX = (
    "Fix the producer, or give the schema the data was written with (the reader schema option); "
    "or set mode=PERMISSIVE to read malformed values as null, with their bytes in the "
    "corrupt-record column"
)


class AvroDecodeError(KafkaEosError, ValueError):
    """A Kafka value is not Avro of its writer schema (FAILFAST mode)."""

    code = "KAFKA_EOS.AVRO.MALFORMED_RECORD"

    def __init__(self, where: str, detail: str) -> None:
        self.where = where
        self.detail = detail
        super().__init__(f"malformed Avro value at {where}: {detail}. {_FIX}")


class AvroEncodeError(KafkaEosError, ValueError):
    """A row does not fit the Avro schema: nothing of its column is written."""

    code = "KAFKA_EOS.AVRO.VALUE_DOES_NOT_FIT"


class _Trailing(ValueError):
    """A datum ended before its value did: the value was written with another schema."""


class AvroDecoder:
    """Decodes Kafka values into one Arrow array of :attr:`arrow_type`, the reader schema's.

    Raw Avro by default, written with ``writer_schema`` (default: the reader schema); with a
    ``registry``, values are in the Confluent wire format and their ids name their writer
    schemas. Created on the driver and shipped to executors: it pickles with its registry's
    config only.
    """

    def __init__(
        self,
        reader_schema: Schema,
        *,
        writer_schema: Schema | None = None,
        registry: SchemaRegistry | None = None,
    ) -> None:
        if writer_schema is not None and registry is not None:
            raise AvroSchemaError(
                "give a decoder either a writer schema (raw Avro) or a schema registry (the "
                "Confluent wire format, whose values name their writer schema), not both"
            )
        self.arrow_type = arrow_type(reader_schema)
        self._reader = physical(reader_schema)
        self._registry = registry
        writer = self._reader if writer_schema is None else physical(writer_schema)
        self._raw = self._resolution(writer)
        self._by_id: dict[int, tuple[Schema, Schema | None]] = {}

    def decode_column(
        self, values: Sequence[bytes | None], *, permissive: bool, where: Callable[[int], str]
    ) -> tuple[pa.Array, list[bytes | None]]:
        """The decoded values, and per value its bytes if it was malformed (else None).

        A null value decodes to null. A malformed value raises :class:`AvroDecodeError` naming
        ``where(i)`` (e.g. "topic orders partition 3 offset 1234"), or with ``permissive``
        decodes to null and its bytes go to the second list.
        """
        rows: list[Any] = []
        corrupt: list[bytes | None] = [None] * len(values)
        decode = self._decode_raw if self._registry is None else self._decode_framed
        buf = io.BytesIO()  # one for the column: ~8% faster than a BytesIO per value
        for i, value in enumerate(values):
            if value is None:
                rows.append(None)
                continue
            try:
                rows.append(decode(buf, value))
            except RegistryError as exc:
                # A registry that cannot answer fails the task in both modes: in PERMISSIVE it
                # would read every value as corrupt. Only the registry's own "no such schema"
                # (not any 404: a wrong URL path answers 404 too) makes a value malformed.
                if not (exc.schema_not_found and permissive):
                    raise
                rows.append(None)
                corrupt[i] = value
            except SchemaResolutionError as exc:
                raise AvroSchemaError(
                    f"the value at {where(i)} cannot be read with the reader schema: {exc}. "
                    "Give a reader schema that can read the writer's (Avro schema resolution)"
                ) from exc
            except Exception as exc:  # any failure to decode the bytes
                if not permissive:
                    raise AvroDecodeError(where(i), f"{type(exc).__name__}: {exc}") from exc
                rows.append(None)
                corrupt[i] = value
        return self._array(rows, values, corrupt, permissive, where), corrupt

    def _decode_raw(self, buf: io.BytesIO, value: bytes) -> Any:
        return _read(buf, value, 0, *self._raw)

    def _decode_framed(self, buf: io.BytesIO, value: bytes) -> Any:
        schema_id, _ = wire.split(value)
        resolution = self._by_id.get(schema_id)
        if resolution is None:
            assert self._registry is not None
            writer = physical(self._registry.writer_schema(schema_id))
            resolution = self._by_id[schema_id] = self._resolution(writer)
        return _read(buf, value, wire.HEADER_BYTES, *resolution)

    def _resolution(self, writer: Schema) -> tuple[Schema, Schema | None]:
        """fastavro's writer and reader schemas: no reader when it is the writer, which spares
        fastavro's comparison of the two per value."""
        same = writer is self._reader or plain(writer) == plain(self._reader)
        return writer, None if same else self._reader

    def _array(
        self,
        rows: list[Any],
        values: Sequence[bytes | None],
        corrupt: list[bytes | None],
        permissive: bool,
        where: Callable[[int], str],
    ) -> pa.Array:
        """``rows`` as one array. A value Arrow refuses (a decimal past the reader's precision,
        a date out of range) is malformed too: found row by row, only on that failure."""
        try:
            return pa.array(rows, type=self.arrow_type)
        except (pa.ArrowException, ValueError, TypeError, OverflowError):
            pass
        for i, row in enumerate(rows):
            try:
                pa.array([row], type=self.arrow_type)
            except (pa.ArrowException, ValueError, TypeError, OverflowError) as exc:
                if not permissive:
                    detail = f"its value does not fit {self.arrow_type}: {exc}"
                    raise AvroDecodeError(where(i), detail) from exc
                rows[i], corrupt[i] = None, values[i]
        return pa.array(rows, type=self.arrow_type)


def _read(buf: io.BytesIO, value: bytes, start: int, writer: Schema, reader: Schema | None) -> Any:
    """The datum of ``value`` from byte ``start`` on, which must end where ``value`` does."""
    buf.seek(0)
    buf.truncate()
    buf.write(value)
    buf.seek(start)
    datum = schemaless_reader(buf, writer, reader)
    if buf.tell() != len(value):
        raise _Trailing(
            f"{len(value) - buf.tell()} of its {len(value)} bytes are left after the datum: it "
            "was written with another schema"
        )
    return datum


class AvroEncoder:
    """Encodes an Arrow column (a struct for a record schema) into Kafka values.

    Raw Avro by default; with a ``registry`` and a ``subject``, the Confluent wire format with
    the schema's id under the subject (looked up, or registered, at the first column). Pickles
    as its arguments: create it on the driver, use it on executors.
    """

    def __init__(
        self, schema: Schema, *, registry: SchemaRegistry | None = None, subject: str | None = None
    ) -> None:
        if (registry is None) != (subject is None):
            raise AvroSchemaError(
                "give an encoder both a schema registry and the subject to register the schema "
                "under (e.g. registry.subject_for(topic, is_key=False)), or neither (raw Avro)"
            )
        self.arrow_type = arrow_type(schema)
        self._target = _nullable(self.arrow_type)
        self._required = arrow_type(schema, required_items=True)
        self._schema = schema
        self._physical = physical(schema)
        self._to_avro = _converter(self._physical, {})
        self._registry = registry
        self._subject = subject
        self._header: bytes | None = None

    def __getstate__(self) -> dict[str, Any]:
        # The converter is closures, which plain pickle refuses: rebuilt on arrival.
        return {"schema": self._schema, "registry": self._registry, "subject": self._subject}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state.pop("schema"), **state)  # type: ignore[misc]

    def encode_column(self, column: pa.Array) -> list[bytes | None]:
        """One value per row; a null row gives None (a null Kafka value). Raises
        :class:`AvroEncodeError` for the first row that does not fit, before returning any."""
        fitted = self._fit(column)
        missing = _required_null(fitted, self._required, "", pa.array(range(len(fitted))))
        if missing is not None:
            # fastavro writes a null boolean as false: such rows must not reach it.
            raise AvroEncodeError(
                f"{missing} is null, but the Avro schema requires a value there. Nothing of "
                "this column was written. Fix the value, or give a schema whose field is a "
                'union with "null"'
            )
        rows = fitted.to_pylist()
        header = self._wire_header()
        start = len(header)
        buf = io.BytesIO()
        buf.write(header)
        schema, convert = self._physical, self._to_avro
        out: list[bytes | None] = []
        for i, row in enumerate(rows):
            if row is None:
                out.append(None)
                continue
            if convert is not None:
                row = convert(row)
            buf.seek(start)
            buf.truncate()
            try:
                schemaless_writer(buf, schema, row)
            except Exception as exc:  # fastavro's errors for a misfit value
                raise self._misfit(i, row, exc) from exc
            out.append(buf.getvalue())
        return out

    def _wire_header(self) -> bytes:
        if self._registry is None:
            return b""
        if self._header is None:
            assert self._subject is not None
            self._header = wire.frame(self._registry.register(self._subject, self._schema), b"")
        return self._header

    def _fit(self, column: pa.Array) -> pa.Array:
        """``column`` as the schema's Arrow type, every field nullable (fastavro then names a
        null in a field that admits none): the same type, or a safe cast to it (another time
        zone, a narrower int that holds every value)."""
        if column.type == self._target:
            return column
        mismatch = _mismatch(column.type, self._target, "")
        if mismatch:
            raise AvroEncodeError(
                f"a column of type {column.type} does not fit the Avro schema, whose type is "
                f"{self.arrow_type}: {mismatch}. Give the column the schema's fields and types, "
                "or give the schema of the column"
            )
        try:
            return column.cast(self._target)
        except pa.ArrowException as exc:
            target = self._target
            bad = (i for i in range(len(column)) if not _casts(column.slice(i, 1), target))
            row = next(bad, "?")  # "?": only the column as a whole fails to cast
            raise AvroEncodeError(
                f"row {row} does not fit the Avro schema's type {self.arrow_type}: {exc}. Fix the "
                "value, or give a schema with a wider type. Nothing of this column was written"
            ) from exc

    def _misfit(self, row: int, value: Any, exc: Exception) -> AvroEncodeError:
        """The error for a row fastavro refused, naming the fields its validation names."""
        detail = f"{type(exc).__name__}: {exc}"
        try:
            validate(value, self._physical, raise_errors=True)
        except ValidationError as invalid:
            detail = "; ".join(
                f"field {e.field or '(the value)'} is a {type(e.datum).__name__}, expected "
                f"{_short(e.schema)}"
                for e in invalid.errors
            )
        return AvroEncodeError(
            f"row {row} does not fit the Avro schema: {detail}. Nothing of this column was "
            "written. Fix the value, or give a schema that admits it"
        )


def _nullable(kind: pa.DataType) -> pa.DataType:
    """``kind`` with every field, item and map value nullable."""
    if pa.types.is_struct(kind):
        return pa.struct([pa.field(f.name, _nullable(f.type)) for f in kind])
    if pa.types.is_map(kind):
        return pa.map_(kind.key_type, _nullable(kind.item_type))
    if pa.types.is_list(kind):
        return pa.list_(_nullable(kind.value_type))
    return kind


def _mismatch(seen: pa.DataType, wanted: pa.DataType, at: str) -> str | None:
    """Where a column's type differs in shape from the schema's (fields, nesting, a type no
    cast turns into the wanted one), or None."""
    where = f"field {at}" if at else "the column"
    if pa.types.is_struct(wanted):
        if not pa.types.is_struct(seen):
            return f"{where} is a {seen}, not a struct"
        names, wanted_names = [f.name for f in seen], [f.name for f in wanted]
        if sorted(names) != sorted(wanted_names):
            return f"{where} has fields {names}, the schema {wanted_names}"
        paths = {n: f"{at}.{n}" if at else n for n in names}
        inner = (_mismatch(seen.field(n).type, wanted.field(n).type, paths[n]) for n in names)
        return next((m for m in inner if m), None)
    if pa.types.is_map(wanted) or pa.types.is_list(wanted):
        kind = "map" if pa.types.is_map(wanted) else "list"
        if not (pa.types.is_map(seen) if kind == "map" else pa.types.is_list(seen)):
            return f"{where} is a {seen}, not a {kind}"
        item = seen.item_type if kind == "map" else seen.value_type
        return _mismatch(item, wanted.item_type if kind == "map" else wanted.value_type, at + "[]")
    if not _widens(seen, wanted):
        return f"{where} is a {seen}, the schema's {wanted}: cast it in Spark first"
    return None


def _widens(seen: pa.DataType, wanted: pa.DataType) -> bool:
    """Whether a column of ``seen`` may be written as ``wanted`` without changing a value: the
    same type, another width of int (the safe cast refuses a value that does not fit), a wider
    float, a decimal of the same scale and no more digits, a timestamp of the same kind (with
    or without a zone). Anything else (double to float, to decimal, timestamp to date, text to
    numbers) would round, cut or reinterpret values silently."""
    if seen == wanted:
        return True
    types = pa.types
    if types.is_integer(seen) and types.is_integer(wanted):
        return True
    if types.is_floating(seen) and types.is_floating(wanted):
        return seen.bit_width <= wanted.bit_width
    if types.is_decimal(seen) and types.is_decimal(wanted):
        return seen.scale == wanted.scale and seen.precision <= wanted.precision
    if types.is_timestamp(seen) and types.is_timestamp(wanted):
        return (seen.tz is None) == (wanted.tz is None)
    text = (types.is_string, types.is_large_string)
    raw = (types.is_binary, types.is_large_binary)
    return any(a(seen) and b(wanted) for kinds in (text, raw) for a in kinds for b in kinds)


def _required_null(
    array: pa.Array, wanted: pa.DataType, at: str, rows: pa.Array | None = None
) -> str | None:
    """Where a field the schema requires (not nullable in ``wanted``) is null in a value that
    is there, as "field <path> of row <n>", or None. ``rows`` maps ``array``'s entries to the
    column's rows. Vectorised: no value goes through Python."""
    if pa.types.is_struct(wanted):
        present = array.is_valid()
        for field in wanted:
            path = f"{at}.{field.name}" if at else field.name
            child = array.field(field.name)  # without the struct's own nulls
            if not field.nullable:
                missing = pc.and_(present, child.is_null())
                if pc.any(missing).as_py():
                    row = pc.index(missing, True).as_py()
                    return f"field {path}" + ("" if rows is None else f" of row {rows[row]}")
            kept = None if rows is None else rows.filter(present)
            found = _required_null(child.filter(present), field.type, path, kept)
            if found is not None:
                return found
        return None
    if pa.types.is_map(wanted) or pa.types.is_list(wanted):
        # Inside a list or map the row is not tracked: the path says where.
        is_map = pa.types.is_map(wanted)
        values = array.items if is_map else array.flatten()
        item = wanted.item_field if is_map else wanted.value_field
        if not item.nullable and values.null_count:
            return f"{'a value of map' if is_map else 'an item of list'} {at or 'value'}"
        return _required_null(values, item.type, f"{at}[]", None)
    return None


def _casts(one_row: pa.Array, target: pa.DataType) -> bool:
    try:
        one_row.cast(target)
    except pa.ArrowException:
        return False
    return True


def _short(schema: Any) -> str:
    text = str(plain(schema))
    return text if len(text) <= 120 else text[:120] + "..."


_Convert = Callable[[Any], Any]


def _converter(schema: Schema, named: dict[str, Any]) -> _Convert | None:
    """How a value of ``to_pylist`` becomes one fastavro writes (maps: pairs to a dict), or
    None when no value under ``schema`` needs it. ``named`` gathers named types as defined."""
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        inner = _converter(branches[0], named) if len(branches) == 1 else None
        return None if inner is None else (lambda v: None if v is None else inner(v))
    if isinstance(schema, str):
        return _converter(named[schema], named) if schema in named else None
    kind = schema["type"]
    if not isinstance(kind, str) or kind in named:
        return _converter(kind, named)
    if kind in ("record", "enum", "fixed"):
        named[schema["name"]] = schema
    if kind == "record":
        fields = [(f["name"], _converter(f["type"], named)) for f in schema["fields"]]
        return _record([(name, c) for name, c in fields if c is not None])
    if kind == "array":
        item = _converter(schema["items"], named)
        return None if item is None else (lambda v: [item(x) for x in v])
    if kind == "map":
        value = _converter(schema["values"], named)
        return dict if value is None else (lambda v: {k: value(x) for k, x in v})
    return None


def _record(fields: list[tuple[str, _Convert]]) -> _Convert | None:
    if not fields:
        return None

    def convert(row: dict[str, Any]) -> dict[str, Any]:
        for name, field in fields:
            row[name] = field(row[name])
        return row

    return convert
