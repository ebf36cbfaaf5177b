"""The writers' common part, and the writers without a transaction.

Each runs in a Spark task on an executor, and produces the task's records with one
confluent-kafka producer, opened for the first record: :class:`BaseWriter` produces (each Arrow
batch in one ``produce_batch`` call per topic and partition) and flushes on the barrier, and
names a failed delivery, a fatal error (a fence) or an oversized record in the task's error.
:class:`AtLeastOnceWriter` (an idempotent producer) and :class:`NoGuaranteeWriter` (the user's
settings as they are) are such writers; the exactly-once writer, which writes in a transaction
and pre-commits it, is :class:`~connectors.kafka.sink.exactly_once_writer.ExactlyOnceWriter`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, NoReturn

import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException, Message, Producer

from checkpoint.errors import ConfigError, KafkaEosError
from connectors.kafka.client_config import LIBRDKAFKA_LOGGER
from connectors.kafka.sink.records import (
    KafkaRecord,
    ProduceBatch,
    carries_headers,
    produce_batches,
    records_of,
)

_log = logging.getLogger(__name__)
_QUEUE_FULL_POLL_S = 0.1
_FENCED = frozenset(
    {KafkaError._FENCED, KafkaError.INVALID_PRODUCER_EPOCH, KafkaError.PRODUCER_FENCED}
)
# A record purged from the producer's queue: the producer stopped (a fence, an abort).
_PURGED = frozenset({KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT})
# librdkafka's name for the Java client's default partitioner: murmur2 of the key (a random
# partition for a null key, where Java's sticks to one per batch).
SPARKS_PARTITIONER = "murmur2_random"


class DeliveryFailed(KafkaEosError):
    """A record could not be written; the task fails and Spark retries it."""

    code = "KAFKA_EOS.SINK.DELIVERY_FAILED"


# Raised by the exactly-once writer; beside DeliveryFailed, where docs/errors.md names both.
class TransactionTooLong(KafkaEosError):
    """The task held its transaction so long that the broker would abort it before the
    driver's commit: the batch is larger than the transaction timeout allows."""

    code = "KAFKA_EOS.SINK.TRANSACTION_TOO_LONG"


class _Delivery:
    """Collects the first delivery error and the producer's fatal error (a fence). The
    producer reports only errors (``delivery.report.only.error``): no Python call for each
    record delivered. Without an ``error_cb``, confluent-kafka turns a fatal error into an
    exception raised from inside the next callback, which Python then reports as a
    ``SystemError`` that names neither the fence nor the transaction."""

    def __init__(self) -> None:
        self.error: KafkaError | None = None
        self.fatal: KafkaError | None = None

    def __call__(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self.error = self.error or error

    def on_error(self, error: KafkaError) -> None:
        if error.fatal():
            self.fatal = self.fatal or error
        else:  # transient (a broker down, a retry): librdkafka carries on by itself
            _log.debug("producer: %s", error.str())


def _oversized(
    topic: str, size: int, config: Mapping[str, Any], error: KafkaError, aftermath: str
) -> ConfigError:
    limit = config.get("message.max.bytes", "1000000 (librdkafka's default)")
    return ConfigError(
        f"a record for topic {topic} is {size} bytes (key + value), above the producer's "
        f"message.max.bytes = {limit}: {error.str()}. Raise kafka.message.max.bytes (and the "
        f"topic's max.message.bytes on the broker), or split the value. {aftermath}"
    )


def _size(key: str | bytes | None, value: str | bytes | None) -> int:
    return sum(len(p.encode() if isinstance(p, str) else p or b"") for p in (key, value))


def _is_fence(error: KafkaError) -> bool:
    """The producer lost its transactional id to a newer producer."""
    return error.code() in _FENCED or "fenced" in error.str().lower()


class BaseWriter:
    """Producing and flushing, shared by every delivery guarantee."""

    # What a failed task leaves for readers, said in its error: without a transaction, what
    # was sent before the failure stays, and the batch's replay sends it again.
    aftermath = (
        "Records this task sent before the failure may already be visible, and the batch's "
        "replay sends them again."
    )

    def __init__(self, producer_config: Mapping[str, Any], topic: str | None, timeout_s: float):
        self._config = dict(producer_config)
        self._topic = topic
        self._timeout_s = timeout_s
        self._producer: Producer | None = None
        self._delivery = _Delivery()
        self.record_count = 0

    def _new_producer(self, extra: Mapping[str, Any]) -> Producer:
        return Producer(self._producer_config(extra))

    def _producer_config(self, extra: Mapping[str, Any]) -> dict[str, Any]:
        return {
            # Connect to the brokers at once, unless the user says otherwise: with sparse
            # connections, the first coordinator lookup of a task's producer (a transactional
            # one, or an idempotent one's producer id) finds no broker connected and waits
            # 50-500 ms to retry.
            "enable.sparse.connections": False,
            # Spark's sink leaves a row without a partition to the Java producer's default
            # partitioner, murmur2 of the key: a key lands where it did before the switch to
            # kafka-eos, and where every Java producer of the topic puts it. librdkafka's own
            # default (consistent_random, CRC32) would move most keys.
            "partitioner": SPARKS_PARTITIONER,
            **self._config,
            **extra,
            "on_delivery": self._delivery,
            "delivery.report.only.error": True,
            "error_cb": self._delivery.on_error,
            "logger": LIBRDKAFKA_LOGGER,
        }

    def _produce_all(self, batches: Iterable[pa.RecordBatch]) -> None:
        """Each Arrow batch in one ``produce_batch`` call per topic and partition; record by
        record only when it carries headers. Delivery errors are served once per batch, not
        per record. The producer is opened for the first record, with its topic."""
        for batch in batches:
            if batch.num_rows == 0:
                continue
            if carries_headers(batch):
                for record in records_of(batch, self._topic):
                    self._produce(self._producer_for(record.topic), record)
            else:
                for call in produce_batches(batch, self._topic):
                    self._produce_batch(self._producer_for(call.topic), call)
            if self._producer is not None:
                self._poll(self._producer, 0)
            self._raise_delivery_error()

    def _producer_for(self, topic: str) -> Producer:
        if self._producer is None:
            self._producer = self._open(topic)
        return self._producer

    def _open(self, topic: str) -> Producer:
        raise NotImplementedError

    def write_and_flush(self, batches: Iterable[pa.RecordBatch]) -> int:
        """Produce the input and flush at the barrier; returns the number of records."""
        self._produce_all(batches)
        self._flush()
        return self.record_count

    def _produce(self, producer: Producer, record: KafkaRecord) -> None:
        kwargs: dict[str, Any] = {"value": record.value, "key": record.key}
        if record.partition is not None:
            kwargs["partition"] = record.partition
        if record.headers:
            kwargs["headers"] = record.headers
        while True:
            try:
                producer.produce(record.topic, **kwargs)
                break
            except BufferError:
                self._poll(producer, _QUEUE_FULL_POLL_S)  # the local queue is full: let it drain
            except KafkaException as exc:
                error = exc.args[0]
                if error.code() == KafkaError.MSG_SIZE_TOO_LARGE:
                    size = _size(record.key, record.value)
                    raise _oversized(
                        record.topic, size, self._config, error, self.aftermath
                    ) from exc
                self._refused(producer, error)
        self.record_count += 1

    def _produce_batch(self, producer: Producer, call: ProduceBatch) -> None:
        """Queue the call's messages in order. A full local queue refuses a tail of them,
        queued again once the queue drained; any other refusal fails the task, as ``produce``
        would."""
        topic, messages = call.topic, call.messages
        while messages:
            try:
                queued = producer.produce_batch(topic, messages, partition=call.partition)
            except BufferError:
                queued = 0
            if queued == len(messages):
                self.record_count += queued
                return
            refused = [(i, m, m.pop("_error")) for i, m in enumerate(messages) if "_error" in m]
            for _, message, error in refused:
                if error.code() == KafkaError._QUEUE_FULL:
                    continue
                if error.code() == KafkaError.MSG_SIZE_TOO_LARGE:
                    size = _size(message.get("key"), message.get("value"))  # type: ignore[arg-type]
                    raise _oversized(topic, size, self._config, error, self.aftermath)
                self._refused(producer, error)
            if refused and refused[0][0] != queued:
                # Never seen: the queue drained while librdkafka went through the list.
                raise DeliveryFailed(
                    f"the producer queued records of topic {topic} after some it refused as the "
                    "queue was full; the task fails rather than write them out of order"
                )
            self.record_count += queued
            messages = messages[queued:]
            self._poll(producer, _QUEUE_FULL_POLL_S)  # the local queue is full: let it drain

    def _refused(self, producer: Producer, error: KafkaError) -> NoReturn:
        """A record refused for another reason than its size or a full queue: a fatal error
        (a fence) says more in its own callback, served by the poll."""
        self._poll(producer, 0)
        self._raise_delivery_error()
        raise KafkaException(error)

    def _poll(self, producer: Producer, timeout_s: float) -> None:
        with self._fatal_error_named():
            producer.poll(timeout_s)

    @contextlib.contextmanager
    def _fatal_error_named(self) -> Iterator[None]:
        """confluent-kafka raises a fatal error (a fence) from the poll or flush that serves
        it, and a delivery callback served after it turns that into a bare ``SystemError``:
        name the recorded fatal error instead."""
        try:
            yield
        except (KafkaException, SystemError):
            self._raise_delivery_error()
            raise

    def _flush(self) -> None:
        if self._producer is None:
            return
        with self._fatal_error_named():
            left = self._producer.flush(self._timeout_s)
        self._raise_delivery_error()
        if left:
            raise DeliveryFailed(
                f"{left} record(s) still undelivered after flushing for {self._timeout_s} s; "
                "check the brokers, or raise the sink option flushTimeoutMs"
            )
        self._raise_delivery_error()

    def _raise_delivery_error(self) -> None:
        error = self._delivery.error
        if error is not None and error.code() in _PURGED:
            self._raise_why_purged()
        stopping = error is not None and (error.fatal() or error.code() in _FENCED)
        fatal = self._delivery.fatal or (error if stopping else None)
        if fatal is not None:
            cause = (
                "A fenced producer lost its transactional id to a newer producer, another "
                "attempt of the task; Spark retries this one."
                if _is_fence(fatal)
                else "Spark retries the task."
            )
            raise DeliveryFailed(
                f"the producer stopped on a fatal error: {fatal.str()} ({fatal.name()}). "
                f"{cause} {self.aftermath}"
            )
        if error is None:
            return
        if error.code() == KafkaError.MSG_SIZE_TOO_LARGE:
            raise ConfigError(
                f"the broker rejected a record as too large ({error.str()}): raise the topic's "
                "max.message.bytes (broker) and kafka.message.max.bytes, or split the value. "
                + self.aftermath
            )
        raise DeliveryFailed(f"a record could not be delivered: {error.str()} ({error.name()})")

    def _raise_why_purged(self) -> None:
        """The producer purged its queue: it stopped (a transactional producer on an error
        that ends its transaction, which librdkafka reports only to the next transactional
        call); a writer that can tell why raises it here."""


class AtLeastOnceWriter(BaseWriter):
    """At-least-once: idempotent producer, flushed on the barrier; retries may duplicate."""

    def _open(self, topic: str) -> Producer:
        return self._new_producer({"enable.idempotence": True, "acks": "all"})


class NoGuaranteeWriter(BaseWriter):
    """No guarantee: the user's producer settings as they are; flushed so the task's records
    are at least sent before it ends."""

    def _open(self, topic: str) -> Producer:
        return self._new_producer({})
