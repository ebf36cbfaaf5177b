"""Which of a record's ``key`` and ``value`` are Avro, with what schema, and how framed.

The same options for the source and the sink, in the one option grammar:

- ``valueFormat`` / ``keyFormat``: ``binary`` (the default, Spark's ``kafka`` format) or ``avro``;
- ``valueSchema`` / ``valueSchemaFile`` (and ``key...``): the schema of the column, as JSON text
  or an ``.avsc`` path. The source decodes into it (the reader schema, evolution applies); the
  sink encodes with it;
- ``valueWriterSchema`` / ``valueWriterSchemaFile``: raw Avro written with another schema
  (source only; default: the column's schema);
- ``schema.registry.url`` and any other ``schema.registry.*`` key: the Confluent wire format,
  through that registry (``connectors.avro.registry``). Without a column schema, the latest
  version of the topic's subject (TopicNameStrategy: ``<topic>-value``) is the schema.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from connectors.avro.registry import SchemaRegistry, subject_for
from connectors.avro.schema import AvroSchemaError, Schema, load_schema
from connectors.options import OptionError, OptionReader

_REGISTRY_PREFIX = "schema.registry."


class Side(StrEnum):
    KEY = "key"
    VALUE = "value"


class Format(StrEnum):
    BINARY = "binary"
    AVRO = "avro"


@dataclass(frozen=True)
class AvroColumn:
    """The ``key`` or ``value`` column in Avro. ``schema`` is ``None`` until :meth:`loaded`
    reads ``schema_file`` or :meth:`resolved` the subject's latest version from the registry.

    The sink defers both: its writer commits decided batches first, and a schema file that
    moved or a registry that is down must not keep a decided batch from being committed.
    """

    side: Side
    schema: Schema | None
    writer_schema: Schema | None = None
    registry: SchemaRegistry | None = None
    schema_file: str | None = None  # not read yet

    @property
    def column(self) -> str:
        return self.side.value

    @property
    def corrupt_column(self) -> str:
        """Where the source's PERMISSIVE mode puts a value it could not decode."""
        return f"_corrupt_{self.side.value}"

    def subject(self, topic: str) -> str:
        """The column's subject for ``topic`` (Confluent's TopicNameStrategy)."""
        return subject_for(topic, self.side == Side.KEY)

    def loaded(self, error: type[OptionError]) -> AvroColumn:
        """With the schema of ``schema_file`` read (no registry call)."""
        if self.schema_file is None:
            return self
        schema = _load(f"{self.side}Schema", None, self.schema_file, error)
        return replace(self, schema=schema, schema_file=None)

    def resolved(self, topic: str | None, error: type[OptionError]) -> AvroColumn:
        """With its schema: the given one, or the latest of ``topic``'s subject."""
        if self.schema_file is not None:
            return self.loaded(error).resolved(topic, error)
        if self.schema is not None:
            return self
        assert self.registry is not None  # avro_columns requires a schema or a registry
        if topic is None:
            raise error(
                f"{self.side}Schema",
                None,
                f"without a schema the {self.side} column takes the latest schema of the "
                f"topic's subject (<topic>-{self.side}), which needs exactly one topic: set "
                f"{self.side}Schema or {self.side}SchemaFile",
            )
        latest = self.registry.latest(self.subject(topic))
        return replace(self, schema=latest.schema)


def avro_columns(
    read: OptionReader, error: type[OptionError], *, source: bool
) -> tuple[AvroColumn, ...]:
    """The Avro columns the options ask for (none, key, value, or both)."""
    registry_options = {k: v for k, v in read.options.items() if k.startswith(_REGISTRY_PREFIX)}
    if registry_options and not registry_options.get("schema.registry.url"):
        raise error(
            "schema.registry.url",
            None,
            f"the options {sorted(registry_options)} are for a schema registry: set its URL, "
            "e.g. http://registry:8081 (Apicurio: http://registry:8080/apis/ccompat/v7)",
        )
    registry = SchemaRegistry(registry_options) if registry_options else None
    columns = []
    for side in Side:
        fmt = Format(read.choice(f"{side}Format", [f.value for f in Format]))
        text, path = _text_or_file(read, f"{side}Schema", error)
        writer_text, writer_path = _text_or_file(read, f"{side}WriterSchema", error)
        if fmt == Format.BINARY:
            given = [n for n in (f"{side}Schema", f"{side}WriterSchema") if _given(read, n)]
            if given:
                raise error(given[0], read.get(given[0]), f"set {side}Format=avro to use it")
            continue
        if not source and (writer_text or writer_path) is not None:
            raise error(
                f"{side}WriterSchema", "...", f"the sink writes with {side}Schema: remove it"
            )
        # The sink reads a schema file later (see AvroColumn); the source at once.
        schema_file = None if source else path
        schema = _load(f"{side}Schema", text, None if schema_file else path, error)
        writer = _load(f"{side}WriterSchema", writer_text, writer_path, error)
        if writer is not None and registry is not None:
            raise error(
                f"{side}WriterSchema",
                "...",
                "with schema.registry.url each value names its writer schema: remove it",
            )
        if schema is None and schema_file is None and registry is None:
            raise error(
                f"{side}Format",
                "avro",
                f"it needs {side}Schema (JSON), {side}SchemaFile (a path) or "
                "schema.registry.url (the Confluent wire format)",
            )
        columns.append(AvroColumn(side, schema, writer, registry, schema_file))
    return tuple(columns)


def _given(read: OptionReader, name: str) -> bool:
    return name in read or f"{name}File" in read


def _text_or_file(
    read: OptionReader, name: str, error: type[OptionError]
) -> tuple[str | None, str | None]:
    """``name`` (JSON text) or ``<name>File`` (a path), not both."""
    text, path = read.get(name), read.get(f"{name}File")
    if text is not None and path is not None:
        raise error(name, "...", f"give {name} or {name}File, not both")
    return text, path


def _load(name: str, text: str | None, path: str | None, error: type[OptionError]) -> Schema | None:
    """The schema of ``name`` (JSON text) or ``<name>File`` (a path); None when neither."""
    if text is None and path is None:
        return None
    try:
        return load_schema(text=text, path=path)
    except AvroSchemaError as exc:
        option = name if text is not None else f"{name}File"
        raise error(option, path if text is None else "...", exc.message) from exc
