"""Read one offset range on an executor, as Arrow record batches in Spark's Kafka row schema.

How a range ``[start, end)`` is read:

1. Assign the partition at ``start`` to the worker's consumer for this configuration
   (``client_pool``: kept from an earlier task, of any partition, or new; given back
   unassigned). No group membership, no commits: the
   offsets live in Spark's checkpoint. ``auto.offset.reset=error`` turns offsets that are gone
   into an error instead of a silent jump, so data loss is reported as ``failOnDataLoss`` says.
2. ``consume`` in batches and build one column list per field, then one
   ``pa.RecordBatch`` per about ``_BATCH_ROWS`` records: no Python tuple per row.
3. Stop when the consumer's **position** reaches ``end``, not when a record with offset
   ``end - 1`` arrives: under ``read_committed`` the last offsets of a range may be aborted
   records or transaction markers, which are never delivered. Waiting for them would hang the
   task until the poll timeout. librdkafka moves the position past a marker, but not past
   aborted records it drops: a range whose tail is aborted records, with their abort marker
   beyond the last stable offset (LSO) because another transaction is still open, would wait
   for that transaction to end. So the consumer has ``enable.partition.eof``: librdkafka
   queues an end-of-partition event when a fetch finds its **fetch position** at the end it
   may read (the LSO under ``read_committed``, the high watermark otherwise). The event
   carries that fetch position and comes behind every record fetched from below it; what
   below it was not delivered was aborted records or markers. An event at or past ``end``
   therefore ends the range at once, with every committed record of the range read.
4. Fail if the position makes no progress for ``kafkaConsumer.pollTimeoutMs``; every few
   seconds without progress, check whether the topic was deleted, or whether the partition's
   log now ends at or below the position (data loss: the offsets left will never exist).

Offsets that are gone ("offset out of range", the topic deleted while the range is read, or a
log that ends inside the range: the topic recreated with fewer records, or truncated by an
unclean election) are data loss, reported as ``failOnDataLoss`` says; offsets that still exist
are retried. An "unknown topic or partition" error, or a stall, is a deletion only once
:func:`~connectors.kafka.source.client.confirmed_absent` confirms it; until then the range is
read on, and the records after such an error in the same batch still count. A stall is a log
end below the position only once several answers over seconds confirm it (``_skip_ended``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from checkpoint.deadline import Deadline
from connectors.kafka.client_pool import WORKER_POOL, ConsumerPool
from connectors.kafka.source.client import (
    UNKNOWN_PARTITION,
    confirmed_absent,
    consumer_identity,
    is_transient,
    open_consumer,
)
from connectors.kafka.source.errors import KafkaSourceError, report_data_loss
from connectors.kafka.source.offsets import describe
from connectors.kafka.source.options import SourceOptions
from connectors.kafka.source.ranges import OffsetRange

_CONSUME_MAX = 10_000
_BATCH_ROWS = 10_000
_POLL_S = 0.1
_GONE_CHECK_S = 5.0
# What confirms, at a stall, that the partition's log ends at or below the position
# (_skip_ended): its high watermark there in every answer for at least _ENDED_CONFIRM_S, and
# in at least _ENDED_ANSWERS answers.
_ENDED_CONFIRM_S = 2.0
_ENDED_POLL_S = 0.5
_ENDED_ANSWERS = 3
# Step 3: end-of-partition events tell where librdkafka's fetch position is (the source
# rejects the key as a user option: it owns it).
READER_SETTINGS: dict[str, object] = {"enable.partition.eof": True}
_FETCH_WAIT_MS = 5
# How long a consumer given back may take to reset its position before it is closed instead.
_RELEASE_S = 0.1
_RELEASE_POLL_S = 0.002

_log = logging.getLogger(__name__)


def read_range(
    offset_range: OffsetRange,
    options: SourceOptions,
    group_id: str,
    schema: pa.Schema,
    *,
    pool: ConsumerPool = WORKER_POOL,
) -> Iterator[pa.RecordBatch]:
    """Every record of ``offset_range`` the isolation level lets through, in offset order.

    The consumer comes from ``pool``: the worker's consumer for this configuration, kept
    from an earlier task (of this partition or another), or a new one.
    """
    settings = reader_settings(options)

    def uncommitted() -> Consumer:
        # The log end a loss is measured against is the high watermark, which a consumer
        # asks for only under read_uncommitted (read_committed gives the last stable offset).
        return open_consumer(options, group_id, **{"isolation.level": "read_uncommitted"})

    key = consumer_identity(options, group_id, **settings)
    partition = TopicPartition(offset_range.topic, offset_range.partition)
    read: _RangeRead | None = None

    def release(consumer: Consumer) -> bool:
        """Unassign; keep the consumer only if it saw no loss (``_RangeRead._report_loss``)
        and nothing of this range can reach the next: librdkafka resets the position once
        the partition's fetcher has stopped, shortly after ``unassign`` returns, and a
        position left from this range would end a lower next range early."""
        consumer.unassign()
        settled = Deadline(_RELEASE_S)
        while consumer.position([partition])[0].offset >= 0:
            if settled.expired():
                return False
            time.sleep(_RELEASE_POLL_S)
        return not (read is not None and read.saw_loss)

    opened = lambda: open_consumer(options, group_id, **settings)  # noqa: E731
    with pool.lend(key, opened, release) as consumer:
        read = _RangeRead(
            consumer,
            offset_range,
            options,
            schema,
            connect=lambda: open_consumer(options, group_id),
            uncommitted=None if options.isolation_level == "read_uncommitted" else uncommitted,
        )
        yield from read.batches()


def reader_settings(options: SourceOptions) -> dict[str, object]:
    """What a range reader's consumer sets beyond :func:`consumer_config`.

    ``enable.partition.eof`` (step 3) is the source's own. ``fetch.wait.max.ms`` is only a
    default, below librdkafka's 500 ms: every offset of a range exists when it is read, so the
    broker holds a fetch open only at a log end past the range, where nothing is wanted, and
    the next range a pooled consumer reads waits for that fetch to come back.
    """
    if "fetch.wait.max.ms" in options.client_config:
        return dict(READER_SETTINGS)
    return {**READER_SETTINGS, "fetch.wait.max.ms": _FETCH_WAIT_MS}


class _RangeRead:
    """The state of one range being read: its consumer, position and pending columns.

    ``connect`` opens another client for the deletion check to ask (a second broker);
    ``uncommitted`` opens the ``read_uncommitted`` client that asks for the high watermark
    (without it, ``consumer`` asks: it must read uncommitted).
    """

    def __init__(
        self,
        consumer: Consumer,
        offset_range: OffsetRange,
        options: SourceOptions,
        schema: pa.Schema,
        *,
        connect: Callable[[], Consumer] | None = None,
        uncommitted: Callable[[], Consumer] | None = None,
    ) -> None:
        self._consumer = consumer
        self._connect = connect
        self._uncommitted = uncommitted
        self._marks: Consumer | None = None  # opened by _watermarks, at the first need
        self._range = offset_range
        self._options = options
        self._columns = _Columns(offset_range.topic, offset_range.partition, schema)
        self._tp = TopicPartition(offset_range.topic, offset_range.partition)
        self.saw_loss = False

    def batches(self) -> Iterator[pa.RecordBatch]:
        try:
            yield from self._read()
        finally:
            if self._marks is not None:
                self._marks.close()

    def _read(self) -> Iterator[pa.RecordBatch]:
        end = self._range.end
        position = self._range.start
        # Step 1
        topic, partition = self._range.topic, self._range.partition
        self._consumer.assign([TopicPartition(topic, partition, position)])
        stalled = Deadline(self._options.poll_timeout_s)
        check_gone = Deadline(_GONE_CHECK_S)
        while position < end:
            before = position
            # Step 2: ask for no more than the offsets left, so that consume returns as soon as
            # they have arrived instead of waiting out its timeout.
            messages = self._consumer.consume(min(_CONSUME_MAX, end - position), timeout=_POLL_S)
            for message in messages:
                source = message.topic()
                if source is not None and (message.partition() != partition or source != topic):
                    # Of another partition: the pooled consumer's earlier assignment (librdkafka
                    # drops those; a record or end event of it must never count for this range).
                    # Client-wide errors name no topic, and are handled below.
                    continue
                error = message.error()
                if error is None:
                    if message.offset() >= end:
                        break
                    self._columns.add(message)
                    # Kept current record by record: a loss reported later in this batch must
                    # not claim records already read.
                    position = message.offset() + 1
                elif error.code() == KafkaError._PARTITION_EOF:
                    # Step 3: librdkafka had fetched every offset below this one and queued
                    # each committed record among them before this event; the rest were
                    # aborted records or markers, which it drops without moving the position.
                    position = max(position, message.offset())
                elif error.code() == KafkaError._AUTO_OFFSET_RESET:
                    position = self._skip_lost(position)
                    break
                elif error.code() in UNKNOWN_PARTITION:
                    position = self._skip_deleted(position)
                    if position >= end:
                        break
                    # Not confirmed: the records after it in this batch still count (the
                    # consumer's position is already past them).
                elif not is_transient(error):
                    raise KafkaSourceError(f"reading {describe(self._range.key)} failed: {error}")
                # A transient error (a broker briefly away) is not the end: the records after
                # it in this batch still count, and the stall deadline bounds the wait.
            if len(self._columns) >= _BATCH_ROWS:
                yield self._columns.flush()
            # Step 3
            position = max(position, self._consumer.position([self._tp])[0].offset)
            if position > before:
                stalled = Deadline(self._options.poll_timeout_s)
                check_gone = Deadline(_GONE_CHECK_S)
                continue
            if check_gone.expired() or stalled.expired():
                # librdkafka reports no error for an assigned partition whose topic was
                # deleted, nor for a position at a log end that went back below the range
                # end (recreated, truncated): the consumer just stalls. A range ends below
                # the last stable offset, so a stall of seconds is worth a metadata lookup
                # and a look at the high watermark.
                position = self._skip_deleted(position)
                if position < end:
                    position = self._skip_ended(position)
                check_gone = Deadline(_GONE_CHECK_S)
            if position < end and stalled.expired():  # Step 4
                raise KafkaSourceError(
                    f"reading {describe(self._range.key)} offsets [{self._range.start}, {end}) "
                    f"made no progress at offset {position} for kafkaConsumer.pollTimeoutMs="
                    f"{self._options.poll_timeout_s * 1000:.0f}: the broker is unreachable or "
                    "slow. Check the broker, or raise kafkaConsumer.pollTimeoutMs"
                )
        # Fetch no more while the last batch waits for Spark: the fetcher would sit at a log end
        # past the range, asking every fetch.wait.max.ms.
        self._consumer.unassign()
        if len(self._columns):
            yield self._columns.flush()

    def _skip_lost(self, position: int) -> int:
        """After "offset out of range": report the loss; return where to go on (``end``: stop).

        Below the log start, the records were deleted (retention, ``delete_records``); at or
        beyond the log end, the log was truncated or recreated. Inside ``[low, high)`` the
        records still exist (a leader change can answer "out of range" for a moment): retry
        there, bounded by the stall deadline.
        """
        low, high = self._watermarks()
        end, where = self._range.end, describe(self._range.key)
        if position < low:
            self._report_loss(
                f"offsets [{position}, {min(low, end)}) of {where} are no longer available "
                f"(its log now starts at {low})"
            )
            resume = low
        elif position >= high:
            self._report_loss(self._beyond(position, high))
            resume = end
        else:
            resume = position
        if resume < end:
            # seek() refuses a partition in this error state; a new assignment resets it.
            self._consumer.assign(
                [TopicPartition(self._range.topic, self._range.partition, resume)]
            )
        return resume

    def _skip_ended(self, position: int) -> int:
        """At a stall, the topic there: once its log is confirmed to end at or below
        ``position``, ``[position, end)`` is lost (return ``end``); else return ``position``.

        The range ends at or below a latest offset the driver saw, and a partition's high
        watermark never goes back but when records below it are destroyed: a clean leader
        change keeps them all, and a new leader that has not caught up answers
        OFFSET_NOT_AVAILABLE instead of a lower one (KIP-207). So a high watermark at or
        below the position means the offsets left were destroyed (the topic recreated with
        fewer records, an unclean election) and will never arrive; waiting would fail every
        attempt and every restart the same way, whatever ``failOnDataLoss`` says. The last
        stable offset, which ``read_committed`` reads up to, proves nothing: at or below the
        position it is a transaction still open, so the high watermark is asked for. It must
        be at or below the position in every answer for ``_ENDED_CONFIRM_S`` and in
        ``_ENDED_ANSWERS`` answers; one above it, or a request that fails (a broker briefly
        away), confirms nothing: the range reads on, bounded by the stall deadline.

        Offsets of a recreated topic that exist are not seen as lost: they are read, and
        nothing here tells their records from the ones the range was planned on (the range
        records no topic ID). So a topic recreated with records up to the range end or beyond
        is read without any report.
        """
        window = Deadline(_ENDED_CONFIRM_S)
        answers = 0
        while True:
            try:
                _, high = self._watermarks()
            except KafkaException as exc:
                where = describe(self._range.key)
                _log.info("kafka-eos source: no high watermark for %s: %s", where, exc)
                return position
            if high < 0 or high > position:  # < 0: no answer
                return position
            answers += 1
            if answers >= _ENDED_ANSWERS and window.expired():
                break
            time.sleep(window.bound(_ENDED_POLL_S))
        self._report_loss(self._beyond(position, high))
        return self._range.end

    def _watermarks(self) -> tuple[int, int]:
        """The partition's log start and high watermark, asked of its leader now."""
        if self._uncommitted is None:
            client = self._consumer
        else:
            if self._marks is None:
                self._marks = self._uncommitted()
            client = self._marks
        low, high = client.get_watermark_offsets(
            self._tp, timeout=self._options.api_timeout_s, cached=False
        )
        return low, high

    def _report_loss(self, message: str) -> None:
        """Report a loss as ``failOnDataLoss`` says. The consumer is not kept after it
        (:attr:`saw_loss`): a consumer that saw its partition's records destroyed may hold
        metadata of the log that was (a recreated topic's old leader epoch, which librdkafka
        keeps and which makes it ignore the new topic's lower one)."""
        self.saw_loss = True
        report_data_loss(message, fail=self._options.fail_on_data_loss)

    def _beyond(self, position: int, high: int) -> str:
        return (
            f"offsets [{position}, {self._range.end}) of {describe(self._range.key)} are "
            f"beyond its log end {high} (the topic was recreated or its log truncated)"
        )

    def _skip_deleted(self, position: int) -> int:
        """After "unknown topic or partition", or a stall: once the deletion is confirmed, the
        rest of the range is lost; retrying would fail every restart the same way, whatever
        ``failOnDataLoss`` says. One answer saying "unknown" is no such confirmation.
        """
        key = self._range.key
        if key not in confirmed_absent(self._consumer, [key], self._connect):
            return position  # not confirmed: keep reading, bounded by the stall deadline
        self._report_loss(
            f"{describe(self._range.key)} is gone (its topic was deleted) while offsets "
            f"[{position}, {self._range.end}) were to be read"
        )
        return self._range.end


class _Columns:
    """Column lists for one Arrow batch; topic and partition are constant per range."""

    def __init__(self, topic: str, partition: int, schema: pa.Schema) -> None:
        self._topic = topic
        self._partition = partition
        self._schema = schema
        self._headers = "headers" in schema.names
        self._reset()

    def _reset(self) -> None:
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.offsets: list[int] = []
        self.stamps: list[int] = []
        self.stamp_types: list[int] = []
        self.headers: list[list[tuple[str, bytes | None]] | None] = []

    def __len__(self) -> int:
        return len(self.offsets)

    def add(self, message: Message) -> None:
        self.keys.append(message.key())
        self.values.append(message.value())
        self.offsets.append(message.offset())
        stamp_type, stamp = message.timestamp()
        self.stamp_types.append(stamp_type)
        self.stamps.append(stamp)
        if self._headers:
            # Spark's source gives null, not an empty array, for a record without headers.
            self.headers.append(message.headers() or None)

    def flush(self) -> pa.RecordBatch:
        """The pending records as one batch, in the schema's field order."""
        rows = len(self.offsets)
        types = {field.name: field.type for field in self._schema}
        arrays = {
            "key": pa.array(self.keys, types["key"]),
            "value": pa.array(self.values, types["value"]),
            "topic": pa.repeat(pa.scalar(self._topic, types["topic"]), rows),
            "partition": pa.repeat(pa.scalar(self._partition, types["partition"]), rows),
            "offset": pa.array(self.offsets, types["offset"]),
            # Kafka gives milliseconds; Spark's timestamp is microseconds.
            "timestamp": pc.multiply(pa.array(self.stamps, pa.int64()), 1000).cast(
                types["timestamp"]
            ),
            # confluent-kafka numbers timestamp types from 0 (none); Java, and Spark, from -1.
            "timestampType": pc.subtract(pa.array(self.stamp_types, pa.int32()), 1).cast(
                types["timestampType"]
            ),
        }
        if self._headers:
            arrays["headers"] = pa.array(self.headers, types["headers"])
        batch = pa.RecordBatch.from_arrays(
            [arrays[name] for name in self._schema.names], schema=self._schema
        )
        self._reset()
        return batch
