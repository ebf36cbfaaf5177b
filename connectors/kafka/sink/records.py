"""Turn the sink's input rows (Arrow record batches) into Kafka records.

The columns are those of Spark's Kafka sink: ``value`` (required, string or binary, may be
null), ``key``, ``topic``, ``partition`` and ``headers`` (array of struct<key string, value
binary>). Bad rows fail with the row's column and value named, never silently skipped.

Two shapes, for the writer's two ways to produce: :func:`produce_batches` hands a batch to
``Producer.produce_batch`` in one call per topic and partition (the fast path);
:func:`records_of` gives one record per row for the batches that carry headers, which
``produce_batch`` cannot send.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

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


def _no_topic(row: int, topic: object) -> ConfigError:
    return ConfigError(
        f"row {row} of the batch has topic {topic!r}: set the sink option 'topic' or give "
        "every row a non-null 'topic' column"
    )


def records_of(batch: pa.RecordBatch, topic_option: str | None) -> Iterator[KafkaRecord]:
    """Rows of ``batch`` as records; the ``topic`` option wins over a ``topic`` column, as in
    Spark's Kafka sink."""
    n = batch.num_rows
    values, keys, topics = (_column(batch, name, n) for name in ("value", "key", "topic"))
    partitions, headers = _column(batch, "partition", n), _column(batch, "headers", n)
    for i in range(n):
        topic = topic_option or topics[i]
        if not topic:
            raise _no_topic(i, topics[i])
        row_headers = headers[i]
        yield KafkaRecord(
            topic=str(topic),
            value=_as_bytes(values[i]),  # type: ignore[arg-type]
            key=_as_bytes(keys[i]),  # type: ignore[arg-type]
            partition=partitions[i],  # type: ignore[arg-type]
            headers=None if row_headers is None else [(h["key"], h["value"]) for h in row_headers],  # type: ignore[attr-defined]
        )


# A message as ``Producer.produce_batch`` takes it: "value" and "key".
BatchMessage = dict[str, object]
# librdkafka's "any partition": its partitioner chooses (RD_KAFKA_PARTITION_UA).
ANY_PARTITION = -1


@dataclass(frozen=True, slots=True)
class ProduceBatch:
    """Consecutive rows for one topic and one partition: one ``produce_batch`` call.
    ``produce_batch`` takes the partition for the whole call; a message's own "partition"
    key is ignored by confluent-kafka, so rows pinned to different partitions must be split."""

    topic: str
    partition: int
    messages: list[BatchMessage]


def carries_headers(batch: pa.RecordBatch) -> bool:
    """Whether any row has a header: ``produce_batch`` cannot send headers, so such a batch
    goes record by record (:func:`records_of`)."""
    if "headers" not in batch.schema.names:
        return False
    lengths = pc.list_value_length(batch.column("headers"))
    return bool(pc.sum(lengths).as_py() or 0)


def produce_batches(batch: pa.RecordBatch, topic_option: str | None) -> list[ProduceBatch]:
    """The rows of a batch without headers as ``produce_batch`` calls, in row order within
    each topic and partition: a topic's rows are cut where their partition changes. Keys and
    values stay ``str`` or ``bytes`` as Arrow gives them: the producer writes ``str`` as
    UTF-8, as :func:`records_of` does. The dict per row is the one Python object per row left:
    ``produce_batch`` takes nothing else (no Arrow buffers)."""
    n = batch.num_rows
    names = batch.schema.names
    values, keys = _column(batch, "value", n), _column(batch, "key", n)
    messages = [{"value": v, "key": k} for v, k in zip(values, keys, strict=True)]
    pinned = "partition" in names and batch.column("partition").null_count < n
    if topic_option and not pinned:
        return [ProduceBatch(topic_option, ANY_PARTITION, messages)] if messages else []
    topics = [topic_option] * n if topic_option else _column(batch, "topic", n)
    partitions = _column(batch, "partition", n) if pinned else [None] * n
    calls: list[ProduceBatch] = []
    open_call: dict[str, ProduceBatch] = {}  # per topic, the call its next row may join
    for i, (topic, partition, message) in enumerate(zip(topics, partitions, messages, strict=True)):
        if not topic:
            raise _no_topic(i, topic)
        target = ANY_PARTITION if partition is None else partition
        call = open_call.get(topic)
        if call is None or call.partition != target:
            call = open_call[topic] = ProduceBatch(topic, target, [])
            calls.append(call)
        call.messages.append(message)
    return calls


def _column(batch: pa.RecordBatch, name: str, n: int) -> list[object]:
    return batch.column(name).to_pylist() if name in batch.schema.names else [None] * n
