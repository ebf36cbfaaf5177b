"""A Python worker's Kafka clients, kept from one task to the next: the range readers'
consumers, and the writers' transaction admins.

Why: PySpark runs a worker's next task in the same process (``spark.python.worker.reuse``, on
by default), and a new librdkafka consumer per task costs threads, a bootstrap, connections
to the leaders and, with TLS or SASL, a handshake on each. Spark's Kafka source keeps its
consumers per executor, keyed by group id and partition (``spark.kafka.consumer.cache.*``),
for the same reason; this is that cache for a Python worker.

Unlike Spark's, a range reader's consumer is keyed by its configuration only, not by
partition. Spark's consumer stays positioned on its partition between tasks; ours is given
back unassigned, so affinity to a partition would buy nothing, and each consumer keeps its
fetch buffers' high-water mark (about 25 MiB measured with 100-byte records): a worker that
read 8 partitions held 8 consumers, and its memory grew with the partitions it had met.

The rules:

- A consumer is keyed by its whole librdkafka configuration: reads with other credentials,
  another isolation level or another query's group id never share. A range reader's
  consumer reads any partition of any topic, one range at a time.
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
from typing import Generic, TypeVar

from confluent_kafka import Consumer, KafkaException

from checkpoint.deadline import Clock

_log = logging.getLogger(__name__)
# Spark's defaults for its executor consumer cache (spark.kafka.consumer.cache.capacity and
# .timeout) are 64 and 5 min per executor; a worker is one of an executor's task slots.
CAPACITY = 16
IDLE_S = 300.0


C = TypeVar("C")


def _kept(client: object) -> bool:
    return True


class ClientPool(Generic[C]):
    """Idle clients by key, least recently given back first; ``close`` ends one for good."""

    def __init__(
        self,
        close: Callable[[C], None],
        capacity: int = CAPACITY,
        idle_s: float = IDLE_S,
        clock: Clock = time.monotonic,
    ) -> None:
        self._close_client = close
        self._capacity = capacity
        self._idle_s = idle_s
        self._clock = clock
        self._idle: OrderedDict[tuple[Hashable, int], tuple[C, float]] = OrderedDict()
        self._lock = threading.Lock()
        self._serial = 0  # tells apart idle clients of one key (two uses at once)

    @contextmanager
    def lend(
        self, key: Hashable, open_client: Callable[[], C], release: Callable[[C], bool] = _kept
    ) -> Iterator[C]:
        """An idle client of ``key``, or a new one from ``open_client``, for one use.

        When the use ends, ``release`` readies the client for the next one (a consumer is
        unassigned) and says whether it may be kept; if not, or if it raises, it is closed.
        A use that failed closes its client: its state is unknown.
        """
        client = self._take(key) or open_client()
        try:
            yield client
        except GeneratorExit:  # the reader's iterator was closed early: a clean stop
            self._give_back(key, client, release)
            raise
        except BaseException:
            self._close(client)
            raise
        else:
            self._give_back(key, client, release)

    def close(self) -> None:
        """Close every idle client."""
        with self._lock:
            idle, self._idle = list(self._idle.values()), OrderedDict()
        for client, _ in idle:
            self._close(client)

    def __len__(self) -> int:
        return len(self._idle)

    def _take(self, key: Hashable) -> C | None:
        with self._lock:
            expired = self._expired()  # first: an expired consumer is closed, not lent
            found = next((slot for slot in self._idle if slot[0] == key), None)
            taken = self._idle.pop(found)[0] if found is not None else None
        for client in expired:
            self._close(client)
        return taken

    def _give_back(self, key: Hashable, client: C, release: Callable[[C], bool]) -> None:
        try:
            keep = release(client)
        except (KafkaException, RuntimeError) as exc:  # RuntimeError: already closed
            _log.info("kafka-eos: not keeping a client that failed to release: %s", exc)
            keep = False
        if not keep:
            self._close(client)
            return
        with self._lock:
            self._serial += 1
            self._idle[(key, self._serial)] = (client, self._clock())
            expired = self._expired()
        for old in expired:
            self._close(old)

    def _close(self, client: C) -> None:
        try:
            self._close_client(client)
        except Exception as exc:  # a client that cannot close cleanly is dropped all the same
            _log.info("kafka-eos: closing a pooled client failed: %s", exc)

    def _expired(self) -> list[C]:
        """Remove (under the lock) and return the clients idle too long or beyond capacity."""
        now = self._clock()
        gone = [slot for slot, (_, since) in self._idle.items() if now - since >= self._idle_s]
        excess = len(self._idle) - len(gone) - self._capacity
        if excess > 0:
            gone += [slot for slot in self._idle if slot not in gone][:excess]
        return [self._idle.pop(slot)[0] for slot in gone]


def _unassign(consumer: Consumer) -> bool:
    consumer.unassign()
    return True


class ConsumerPool(ClientPool[Consumer]):
    """Range readers' consumers: given back unassigned."""

    def __init__(
        self, capacity: int = CAPACITY, idle_s: float = IDLE_S, clock: Clock = time.monotonic
    ) -> None:
        super().__init__(lambda consumer: consumer.close(), capacity, idle_s, clock)

    @contextmanager
    def lend(
        self,
        key: Hashable,
        open_client: Callable[[], Consumer],
        release: Callable[[Consumer], bool] = _unassign,
    ) -> Iterator[Consumer]:
        with super().lend(key, open_client, release) as consumer:
            yield consumer


# The consumers of this Python worker's range reads.
WORKER_POOL = ConsumerPool()
