"""A Python worker's range-reader consumers, kept from one task to the next.

Why: PySpark runs a worker's next task in the same process (``spark.python.worker.reuse``, on
by default), and a new librdkafka consumer per task costs threads, a bootstrap, connections
to the leaders and, with TLS or SASL, a handshake on each. Spark's Kafka source keeps its
consumers per executor, keyed by group id and partition (``spark.kafka.consumer.cache.*``),
for the same reason; this is that cache for a Python worker.

The rules:

- A consumer is keyed by its whole librdkafka configuration and the partition it reads: reads
  with other credentials, another isolation level or another query's group id never share.
- It is lent to one read at a time, and given back **unassigned**: an idle consumer fetches
  nothing, so what it fetched past its range's end is at most the fetch that was in flight.
- A read that failed closes its consumer instead of giving it back (its state is unknown); a
  read stopped early (Spark closed the iterator) gives it back: unassigning drops what it had
  queued, and librdkafka's assignment versions drop any answer still in flight. The reader's
  ``release`` may refuse to keep a consumer (the range reader's does after a data loss).
- Idle consumers are closed after ``idle_s``, and the least recently used beyond
  ``capacity``, whenever a consumer is lent or given back. A worker that runs no more tasks
  keeps its idle consumers until Spark stops it (as an idle worker) or the executor ends:
  they are unassigned, so nothing is left to finish.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager

from confluent_kafka import Consumer, KafkaException

from checkpoint.deadline import Clock

_log = logging.getLogger(__name__)
# Spark's defaults for its executor consumer cache (spark.kafka.consumer.cache.capacity and
# .timeout) are 64 and 5 min per executor; a worker is one of an executor's task slots.
CAPACITY = 16
IDLE_S = 300.0


def _unassign(consumer: Consumer) -> bool:
    consumer.unassign()
    return True


class ConsumerPool:
    """Idle consumers by key, least recently given back first."""

    def __init__(
        self, capacity: int = CAPACITY, idle_s: float = IDLE_S, clock: Clock = time.monotonic
    ) -> None:
        self._capacity = capacity
        self._idle_s = idle_s
        self._clock = clock
        self._idle: OrderedDict[tuple[Hashable, int], tuple[Consumer, float]] = OrderedDict()
        self._lock = threading.Lock()
        self._serial = 0  # tells apart idle consumers of one key (two reads at once)

    @contextmanager
    def lend(
        self,
        key: Hashable,
        open_consumer: Callable[[], Consumer],
        release: Callable[[Consumer], bool] = _unassign,
    ) -> Iterator[Consumer]:
        """An idle consumer of ``key``, or a new one from ``open_consumer``, for one read.

        When the read ends, ``release`` readies the consumer for the next read (unassigns
        it) and says whether it may be kept; if not, or if it raises, it is closed.
        """
        consumer = self._take(key) or open_consumer()
        try:
            yield consumer
        except GeneratorExit:  # the reader's iterator was closed early: a clean stop
            self._give_back(key, consumer, release)
            raise
        except BaseException:
            _close(consumer)
            raise
        else:
            self._give_back(key, consumer, release)

    def close(self) -> None:
        """Close every idle consumer."""
        with self._lock:
            idle, self._idle = list(self._idle.values()), OrderedDict()
        for consumer, _ in idle:
            _close(consumer)

    def __len__(self) -> int:
        return len(self._idle)

    def _take(self, key: Hashable) -> Consumer | None:
        with self._lock:
            expired = self._expired()  # first: an expired consumer is closed, not lent
            found = next((slot for slot in self._idle if slot[0] == key), None)
            taken = self._idle.pop(found)[0] if found is not None else None
        for consumer in expired:
            _close(consumer)
        return taken

    def _give_back(
        self, key: Hashable, consumer: Consumer, release: Callable[[Consumer], bool]
    ) -> None:
        try:
            keep = release(consumer)
        except (KafkaException, RuntimeError) as exc:  # RuntimeError: already closed
            _log.info("kafka-eos source: not keeping a consumer that failed to unassign: %s", exc)
            keep = False
        if not keep:
            _close(consumer)
            return
        with self._lock:
            self._serial += 1
            self._idle[(key, self._serial)] = (consumer, self._clock())
            expired = self._expired()
        for old in expired:
            _close(old)

    def _expired(self) -> list[Consumer]:
        """Remove (under the lock) and return the consumers idle too long or beyond capacity."""
        now = self._clock()
        gone = [slot for slot, (_, since) in self._idle.items() if now - since >= self._idle_s]
        excess = len(self._idle) - len(gone) - self._capacity
        if excess > 0:
            gone += [slot for slot in self._idle if slot not in gone][:excess]
        return [self._idle.pop(slot)[0] for slot in gone]


def _close(consumer: Consumer) -> None:
    try:
        consumer.close()
    except (KafkaException, RuntimeError) as exc:  # RuntimeError: already closed
        _log.info("kafka-eos source: closing a consumer failed: %s", exc)


# The consumers of this Python worker's range reads.
WORKER_POOL = ConsumerPool()
