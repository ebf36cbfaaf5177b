"""The worker's consumer pool as pure logic: lending, giving back, closing, eviction."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, KafkaException

from connectors.kafka.client_pool import ConsumerPool


class Consumer:
    def __init__(self, name: str, *, unassign_fails: bool = False) -> None:
        self.name = name
        self.unassigned = 0
        self.closed = False
        self._unassign_fails = unassign_fails

    def unassign(self) -> None:
        if self._unassign_fails:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT))
        self.unassigned += 1

    def close(self) -> None:
        self.closed = True


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Opener:
    def __init__(self, **kwargs: bool) -> None:
        self.opened: list[Consumer] = []
        self._kwargs = kwargs

    def __call__(self) -> Consumer:
        self.opened.append(Consumer(f"c{len(self.opened)}", **self._kwargs))
        return self.opened[-1]


def lend(pool: ConsumerPool, key: str, opener: Opener) -> Consumer:
    with pool.lend(key, opener) as consumer:  # type: ignore[arg-type]
        return consumer  # type: ignore[return-value]


def test_a_consumer_given_back_is_unassigned_and_lent_again_for_its_key_only() -> None:
    pool, opener = ConsumerPool(), Opener()
    first = lend(pool, "a", opener)
    assert first.unassigned == 1 and not first.closed
    assert lend(pool, "a", opener) is first
    other = lend(pool, "b", opener)
    assert other is not first
    assert len(pool) == 2


def test_a_read_that_raised_closes_its_consumer() -> None:
    pool, opener = ConsumerPool(), Opener()
    with pytest.raises(ValueError), pool.lend("a", opener) as consumer:  # type: ignore[arg-type]
        raise ValueError("failed read")
    assert consumer.closed and consumer.unassigned == 0  # type: ignore[attr-defined]
    assert len(pool) == 0
    assert lend(pool, "a", opener) is not consumer


def test_a_reader_stopped_early_gives_its_consumer_back() -> None:
    pool, opener = ConsumerPool(), Opener()

    def read() -> Iterator[int]:
        with pool.lend("a", opener):  # type: ignore[arg-type]
            yield 1
            yield 2

    batches = read()
    next(batches)
    batches.close()  # GeneratorExit: Spark stopped reading the task's iterator
    assert len(pool) == 1 and not opener.opened[0].closed


def test_two_reads_of_one_key_at_once_get_two_consumers_and_both_are_kept() -> None:
    pool, opener = ConsumerPool(), Opener()
    with pool.lend("a", opener) as one, pool.lend("a", opener) as two:  # type: ignore[arg-type]
        assert one is not two
    assert len(pool) == 2
    assert {lend(pool, "a", opener), lend(pool, "a", opener)} <= {one, two}


def test_a_consumer_that_fails_to_unassign_is_closed_not_kept() -> None:
    pool, opener = ConsumerPool(), Opener(unassign_fails=True)
    consumer = lend(pool, "a", opener)
    assert consumer.closed and len(pool) == 0


def test_idle_consumers_are_closed_after_the_idle_time() -> None:
    clock = Clock()
    pool, opener = ConsumerPool(idle_s=300, clock=clock), Opener()
    old = lend(pool, "a", opener)
    clock.now = 299
    assert lend(pool, "a", opener) is old  # given back again at 299
    clock.now = 598
    lend(pool, "b", opener)
    assert not old.closed
    clock.now = 599  # 300 s since it was given back
    assert lend(pool, "a", opener) is not old
    assert old.closed


def test_beyond_capacity_the_least_recently_given_back_is_closed() -> None:
    pool, opener = ConsumerPool(capacity=2), Opener()
    a, b = lend(pool, "a", opener), lend(pool, "b", opener)
    assert lend(pool, "a", opener) is a  # a is now the most recent
    c = lend(pool, "c", opener)
    assert b.closed and not a.closed and not c.closed
    assert len(pool) == 2


def test_capacity_zero_keeps_nothing_and_close_closes_every_idle_consumer() -> None:
    none, opener = ConsumerPool(capacity=0), Opener()
    assert lend(none, "a", opener).closed
    pool = ConsumerPool()
    kept = [lend(pool, key, opener) for key in "xyz"]
    pool.close()
    assert all(consumer.closed for consumer in kept) and len(pool) == 0
