"""What one write task of the sink does from its first row to its barrier (the end of its
input), whatever engine runs it: encode the Avro columns, produce, and pre-commit
(``exactly_once``) or flush (``at_least_once``, ``none``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import TYPE_CHECKING

from checkpoint.model import Committable
from connectors.avro.batches import BatchEncoder
from connectors.kafka.sink.errors import SinkOptionError
from connectors.kafka.sink.exactly_once_writer import ExactlyOnceWriter
from connectors.kafka.sink.options import DeliveryGuarantee, SinkOptions
from connectors.kafka.sink.writer import AtLeastOnceWriter, NoGuaranteeWriter

if TYPE_CHECKING:
    import pyarrow as pa


def with_schema_files(sink: SinkOptions) -> SinkOptions:
    """``sink`` with its Avro schema files read, on the driver (executors may not see them)."""
    avro = tuple(column.loaded(SinkOptionError) for column in sink.avro)
    return dataclasses.replace(sink, avro=avro) if avro else sink


def pre_commit(
    sink: SinkOptions, checkpoint_id: int, candidates: list[str], batches: Iterator[pa.RecordBatch]
) -> Committable:
    """Produce the task's input into one transaction on a free id of ``candidates``, and
    pre-commit it at the barrier: the committable the driver decides on."""
    writer = ExactlyOnceWriter(
        sink.producer_config,
        sink.topic,
        candidates,
        sink.flush_timeout_s,
        commit_timeout_s=sink.commit_timeout_s,
    )
    return writer.write_and_pre_commit(checkpoint_id, _encoded(sink, batches))


def flush(sink: SinkOptions, batches: Iterator[pa.RecordBatch]) -> None:
    """``at_least_once`` or ``none``: produce, and flush at the end of the input."""
    at_least_once = sink.guarantee == DeliveryGuarantee.AT_LEAST_ONCE
    writer_class = AtLeastOnceWriter if at_least_once else NoGuaranteeWriter
    writer = writer_class(sink.producer_config, sink.topic, sink.flush_timeout_s)
    writer.write_and_flush(_encoded(sink, batches))


def _encoded(sink: SinkOptions, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The batches with their Avro columns encoded, each before it is produced: a value that
    does not fit its schema fails the task, and with exactly_once nothing of it is visible.
    A column without a schema takes its subject's latest here, in the task: never in the
    driver's commit or abort, which a registry outage must not stop."""
    if not sink.avro:
        return batches
    columns = [column.resolved(sink.topic, SinkOptionError) for column in sink.avro]
    return BatchEncoder(columns, sink.topic).encode(batches)
