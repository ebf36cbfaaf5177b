"""Read a topic from the beginning up to its current end: what a downstream reader sees.

Used by ``kafka-eos verify`` and by the tests that count duplicates and losses. The end is
taken per partition when the drain starts, with the reader's isolation level: for
``read_committed`` that is the last stable offset, so an open transaction ends the drain
instead of stalling it. A partition is done when the consumer's position reaches its end, or
when librdkafka's end-of-partition event does: the event carries its fetch position and comes
behind every record fetched below it, so it also ends a partition whose tail is aborted
records (dropped without moving the position) with their marker past the end.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from connectors.kafka.client_config import LIBRDKAFKA_LOGGER
from connectors.kafka.source.client import is_transient

_POLL_S = 0.5


@dataclass(frozen=True)
class DrainedRecord:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


def drain(
    bootstrap_servers: str,
    topic: str,
    isolation_level: str = "read_committed",
    timeout_s: float = 60.0,
    config: dict[str, str] | None = None,
) -> list[DrainedRecord]:
    """Every record of ``topic`` below the end offsets seen at the start, in partition order.

    Raises ``TimeoutError`` if the end is not reached within ``timeout_s``: a drain that
    silently returned a prefix would hide losses.
    """
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": f"kafka-eos-drain-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "isolation.level": isolation_level,
            "enable.partition.eof": True,
            "logger": LIBRDKAFKA_LOGGER,
            **(config or {}),
        }
    )
    try:
        metadata = consumer.list_topics(topic, timeout=timeout_s).topics[topic]
        if metadata.error is not None:
            raise KafkaException(metadata.error)
        partitions = sorted(metadata.partitions)
        deadline = time.monotonic() + timeout_s
        marks = {p: _watermarks(consumer, TopicPartition(topic, p), deadline) for p in partitions}
        ends = {p: high for p, (_, high) in marks.items()}
        # A partition whose records were all deleted (log start == end) delivers nothing and
        # its position never moves: waiting for it would end in a false TimeoutError.
        pending = {p for p, (low, high) in marks.items() if low < high}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in pending])
        records: list[DrainedRecord] = []
        while pending:
            if time.monotonic() > deadline:
                positions = consumer.position([TopicPartition(topic, p) for p in sorted(pending)])
                raise TimeoutError(
                    f"drain of {topic} ({isolation_level}) did not reach the end offsets {ends} "
                    f"within {timeout_s:.0f} s; positions: "
                    + ", ".join(f"{tp.partition}@{tp.offset}" for tp in positions)
                )
            for message in consumer.consume(num_messages=10_000, timeout=_POLL_S):
                error = message.error()
                if error is not None and error.code() == KafkaError._PARTITION_EOF:
                    if message.offset() >= ends[message.partition()]:
                        pending.discard(message.partition())
                    continue
                if error is not None:
                    # A broker briefly away is not the end; the deadline bounds the wait.
                    if is_transient(error):
                        continue
                    raise KafkaException(error)
                partition, offset = message.partition(), message.offset()
                if offset < ends[partition]:
                    records.append(
                        DrainedRecord(
                            topic,
                            partition,
                            offset,
                            message.key(),
                            message.value(),
                            tuple(message.headers() or ()),
                        )
                    )
            # Aborted records and transaction markers are never delivered, so the position, not
            # the last delivered offset, tells whether a partition is done.
            positions = consumer.position([TopicPartition(topic, p) for p in pending])
            pending -= {tp.partition for tp in positions if tp.offset >= ends[tp.partition]}
        return sorted(records, key=lambda r: (r.partition, r.offset))
    finally:
        consumer.close()


def _watermarks(consumer: Consumer, partition: TopicPartition, deadline: float) -> tuple[int, int]:
    """The partition's log start and its end for this isolation level; retried while a broker
    is briefly away (one restarting or failing over answers "not leader" for a moment)."""
    while True:
        try:
            left = max(deadline - time.monotonic(), 0.001)
            return consumer.get_watermark_offsets(partition, timeout=left, cached=False)
        except KafkaException as exc:
            if not is_transient(exc.args[0]) or time.monotonic() >= deadline:
                raise
            time.sleep(_POLL_S)
