"""Turn the sink's input rows (Arrow record batches) into Kafka records.

The columns are those of Spark's Kafka sink: ``value`` (required, string or binary, may be
null), ``key``, ``topic``, ``partition`` and ``headers`` (array of struct<key string, value
binary>). Bad rows fail with the row's column and value named, never silently skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa

from checkpoint.errors import ConfigError

Headers = list[tuple[str, bytes | None]]


@dataclass(frozen=True, slots=True)
class KafkaRecord:
    topic: str
    value: bytes | None
    key: bytes | None
    partition: int | None
    headers: Headers | None


def _as_bytes(value: str | bytes | None) -> bytes | None:
    return value.encode() if isinstance(value, str) else value


def records_of(batch: pa.RecordBatch, topic_option: str | None) -> Iterator[KafkaRecord]:
    """Rows of ``batch`` as records; the ``topic`` option wins over a ``topic`` column, as in
    Spark's Kafka sink."""
    n = batch.num_rows
    names = set(batch.schema.names)

    def column(name: str) -> list[object]:
        return batch.column(name).to_pylist() if name in names else [None] * n

    values, keys, topics = column("value"), column("key"), column("topic")
    partitions, headers = column("partition"), column("headers")
    for i in range(n):
        topic = topic_option or topics[i]
        if not topic:
            raise ConfigError(
                f"row {i} of the batch has topic {topics[i]!r}: set the sink option 'topic' or "
                "give every row a non-null 'topic' column"
            )
        row_headers = headers[i]
        yield KafkaRecord(
            topic=str(topic),
            value=_as_bytes(values[i]),  # type: ignore[arg-type]
            key=_as_bytes(keys[i]),  # type: ignore[arg-type]
            partition=partitions[i],  # type: ignore[arg-type]
            headers=None if row_headers is None else [(h["key"], h["value"]) for h in row_headers],  # type: ignore[attr-defined]
        )
