"""Transactions as a partition's leader sees them, not as their coordinator does: which
producers hold a transaction open there (DescribeProducers, KIP-664), where the last stable
offset stands against the high watermark, and whose records open a range.

The coordinator's view and the partition's can disagree: a partition may hold a transaction
open that its coordinator ended, when the marker that should have ended it there never came
(a record accepted after an abort on a broker without partition verification, or a marker that
a Kafka 4.x coordinator skipped, KAFKA-20734). The operator's ``txn find-hanging`` and the
sink's repair of skipped COMMIT markers both look here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import kafka.errors as Errors
from kafka.admin import KafkaAdminClient, OffsetSpec
from kafka.structs import TopicPartition


@dataclass(frozen=True)
class OpenOnPartition:
    """A transaction a partition's leader reports open."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    start_offset: int
    last_timestamp_ms: int


@dataclass(frozen=True)
class BatchHeader:
    """The header of the record batch at an offset: whose records they are."""

    base_offset: int
    producer_id: int
    producer_epoch: int
    transactional: bool
    control: bool = False  # a marker's batch, not records


def open_on_partitions(
    admin: KafkaAdminClient, partitions: Iterable[TopicPartition]
) -> list[OpenOnPartition]:
    """The transactions the partitions' leaders report open (DescribeProducers)."""
    opened = []
    for tp, state in sorted(admin.describe_producers(list(partitions)).items()):
        for producer in state.active_producers:
            if producer.current_transaction_start_offset >= 0:
                opened.append(
                    OpenOnPartition(
                        tp.topic,
                        tp.partition,
                        producer.producer_id,
                        producer.producer_epoch,
                        producer.coordinator_epoch,
                        producer.current_transaction_start_offset,
                        producer.last_timestamp,
                    )
                )
    return opened


def end_offsets(
    admin: KafkaAdminClient, topic: str, *, timeout_ms: int
) -> dict[TopicPartition, int]:
    """Each partition of ``topic`` and its log end offset (read_uncommitted): one Metadata
    request, then one ListOffsets per leader."""
    [described] = admin.describe_topics([topic])
    error = Errors.for_code(described["error_code"])
    if error is not Errors.NoError:
        raise error(f"Metadata of {topic}: answered {error.__name__}")
    tps = [TopicPartition(topic, p["partition_index"]) for p in described["partitions"]]
    ends = admin.list_partition_offsets(
        dict.fromkeys(tps, OffsetSpec.LATEST),
        isolation_level="read_uncommitted",
        timeout_ms=timeout_ms,
    )
    return {tp: ends[tp].offset for tp in tps}


def unstable_partitions(
    admin: KafkaAdminClient, partitions: Iterable[TopicPartition], *, timeout_ms: int
) -> list[TopicPartition]:
    """Those of ``partitions`` whose last stable offset is below their high watermark: a
    transaction of someone is open there. Two ListOffsets per leader, far cheaper than
    DescribeProducers, which lists every producer that wrote within the expiration time."""
    specs = dict.fromkeys(partitions, OffsetSpec.LATEST)
    if not specs:
        return []
    # The end first: a record appended between the two reads then cannot pass for an open
    # transaction, and one open when the end was read is still open, or was ended, after it.
    end = admin.list_partition_offsets(
        specs, isolation_level="read_uncommitted", timeout_ms=timeout_ms
    )
    stable = admin.list_partition_offsets(
        specs, isolation_level="read_committed", timeout_ms=timeout_ms
    )
    return sorted(tp for tp in specs if stable[tp].offset < end[tp].offset)
