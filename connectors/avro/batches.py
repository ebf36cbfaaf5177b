"""Kafka record batches with Avro columns: decoded after the source reads, encoded before the
sink writes. Only the ``key`` and ``value`` columns change; the Kafka columns (topic,
partition, offset) name a malformed record in errors.

Built on the driver and pickled to the tasks, which decode or encode.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa

from connectors.avro.codec import AvroDecoder, AvroEncoder
from connectors.avro.options import AvroColumn


class BatchDecoder:
    """The source's side: binary ``key``/``value`` columns into their Avro types, plus, in
    PERMISSIVE mode, the bytes of each malformed value in ``_corrupt_<column>``."""

    def __init__(self, columns: Sequence[AvroColumn], *, permissive: bool) -> None:
        decoders = []
        for column in columns:
            if column.schema is None:
                raise ValueError("resolve each Avro column's schema before decoding with it")
            decoder = AvroDecoder(
                column.schema, writer_schema=column.writer_schema, registry=column.registry
            )
            decoders.append((column, decoder))
        self._decoders = tuple(decoders)
        self._permissive = permissive

    def fields(self) -> list[tuple[str, pa.DataType]]:
        """(column, Arrow type) of each decoded column, then of each corrupt-record column."""
        decoded = [(c.column, d.arrow_type) for c, d in self._decoders]
        corrupt = [(c.corrupt_column, pa.binary()) for c, _ in self._decoders]
        return decoded + (corrupt if self._permissive else [])

    def decode(
        self, batches: Iterator[pa.RecordBatch], schema: pa.Schema
    ) -> Iterator[pa.RecordBatch]:
        """``batches`` as ``schema``: the read schema with the decoded and corrupt columns."""
        for batch in batches:
            yield self._decode(batch, schema)

    def _decode(self, batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
        topics, partitions, offsets = (batch.column(n) for n in ("topic", "partition", "offset"))

        def where(i: int) -> str:
            return f"topic {topics[i]} partition {partitions[i]} offset {offsets[i]}"

        arrays = {name: batch.column(name) for name in batch.schema.names}
        for column, decoder in self._decoders:
            values = arrays[column.column].to_pylist()
            decoded, corrupt = decoder.decode_column(
                values, permissive=self._permissive, where=where
            )
            arrays[column.column] = decoded
            if self._permissive:
                arrays[column.corrupt_column] = pa.array(corrupt, type=pa.binary())
        return pa.RecordBatch.from_arrays([arrays[f.name] for f in schema], schema=schema)


class BatchEncoder:
    """The sink's side: Avro ``key``/``value`` columns (a struct for a record schema) into
    binary, each column encoded whole before the batch goes on, so a value that does not fit
    the schema fails the task with nothing of that batch produced."""

    def __init__(self, columns: Sequence[AvroColumn], topic: str | None) -> None:
        encoders = []
        for column in columns:
            if column.schema is None:
                raise ValueError("resolve each Avro column's schema before encoding with it")
            registry, subject = column.registry, None
            if registry is not None:
                if topic is None:
                    raise ValueError("the Confluent wire format needs the topic of the subject")
                subject = column.subject(topic)
            encoder = AvroEncoder(column.schema, registry=registry, subject=subject)
            encoders.append((column.column, encoder))
        self._encoders = tuple(encoders)

    def encode(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield self._encode(batch)

    def _encode(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        columns = {name: batch.column(name) for name in batch.schema.names}
        for name, encoder in self._encoders:
            if name in columns:
                columns[name] = pa.array(encoder.encode_column(columns[name]), type=pa.binary())
        return pa.RecordBatch.from_pydict(columns)
