"""The pinned-LSO warning: an LSO that stays below the high watermark for longer than the
broker's transaction.max.timeout.ms (a hanging transaction hidden from Spark's progress)."""

from __future__ import annotations

import logging

import pytest
from test_source_stream_reader import reader

from connectors.kafka.source.errors import KafkaSourceError
from connectors.kafka.source.lag import PinnedLso, pinned_warning
from connectors.spark.compat import ReadAllAvailable

T0 = ("t", 0)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def tracker(threshold_s: float = 10.0, interval_s: float = 0.0) -> tuple[PinnedLso, Clock]:
    clock = Clock()
    return PinnedLso(lambda: threshold_s, clock=clock, interval_s=interval_s), clock


def test_pinned_longer_than_the_threshold_is_reported_once() -> None:
    pinned, clock = tracker()
    assert pinned.observe({T0: 5}, {T0: 8}) == []
    clock.now = 10.0  # exactly the threshold: not longer
    assert pinned.observe({T0: 5}, {T0: 9}) == []
    clock.now = 10.5
    [found] = pinned.observe({T0: 5}, {T0: 12})
    assert (found.key, found.lso, found.high, found.pinned_s) == (T0, 5, 12, 10.5)
    clock.now = 100.0
    assert pinned.observe({T0: 5}, {T0: 20}) == []  # warned once per pinned value


def test_an_lso_that_moves_starts_over_and_can_be_reported_again() -> None:
    pinned, clock = tracker()
    pinned.observe({T0: 5}, {T0: 8})
    clock.now = 11.0
    assert len(pinned.observe({T0: 5}, {T0: 8})) == 1
    clock.now = 12.0
    assert pinned.observe({T0: 6}, {T0: 9}) == []  # moved: a new value, timed from now
    clock.now = 20.0
    assert pinned.observe({T0: 6}, {T0: 9}) == []
    clock.now = 22.5
    assert [p.lso for p in pinned.observe({T0: 6}, {T0: 9})] == [6]


def test_caught_up_or_unknown_is_not_pinned() -> None:
    pinned, clock = tracker()
    pinned.observe({T0: 5, ("t", 1): 3}, {T0: 8, ("t", 1): 3})
    clock.now = 5.0
    pinned.observe({T0: 8, ("t", 1): 3}, {T0: 8})  # T0 caught up; t-1 not answered
    clock.now = 30.0
    assert pinned.observe({T0: 8, ("t", 1): 3}, {T0: 8, ("t", 1): 9}) == []
    clock.now = 50.0
    assert [p.key for p in pinned.observe({T0: 8, ("t", 1): 3}, {T0: 8, ("t", 1): 9})] == [("t", 1)]


def test_the_threshold_is_asked_once_and_only_when_something_is_pinned() -> None:
    asked: list[int] = []

    def threshold() -> float:
        asked.append(1)
        return 10.0

    clock = Clock()
    pinned = PinnedLso(threshold, clock=clock, interval_s=0.0)
    pinned.observe({T0: 8}, {T0: 8})
    pinned.observe({T0: 5}, {T0: 8})
    assert asked == []
    for clock.now in (1.0, 2.0, 30.0):
        pinned.observe({T0: 5}, {T0: 8})
    assert asked == [1]


def test_due_at_most_once_per_interval() -> None:
    pinned, clock = tracker(interval_s=10.0)
    assert pinned.due()
    pinned.observe({}, {})
    clock.now = 9.9
    assert not pinned.due()
    clock.now = 10.0
    assert pinned.due()


def test_the_warning_names_the_partition_offsets_and_the_fix() -> None:
    pinned, clock = tracker()
    pinned.observe({T0: 5}, {T0: 8})
    clock.now = 61.0
    [found] = pinned.observe({T0: 5}, {T0: 8})
    text = pinned_warning(found, 10_000, "b1:9092,b2:9092")
    for part in (
        "t-0",
        "stayed at 5 for at least 61 s",
        "high watermark is at 8",
        "transaction.max.timeout.ms (10000 ms)",
        "read_committed readers (this query) cannot pass an open transaction",
        # Past the timeout it is most likely hanging: tools that find it on the partition.
        "`kafka-eos txn find-hanging --bootstrap-servers b1:9092,b2:9092 --topic t --abort`",
        "`kafka-transactions.sh abort --topic t --partition 0 --start-offset 5`",
        "`kafka-eos txn list --bootstrap-servers b1:9092,b2:9092`",
    ):
        assert part in text


def test_the_stream_reader_warns_of_a_pinned_lso_and_reports_the_high_watermark(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stream, fake = reader({T0: 5})
    clock = Clock()
    planner = stream._planner
    planner._pinned = PinnedLso(planner._threshold_s, clock=clock)  # every 10 s at most
    fake.high_offsets = {T0: 9}
    start = {"t": {"0": 0}}
    with caplog.at_level(logging.WARNING, logger="connectors.spark.source"):
        for clock.now in (0.0, 5.0, 899.0, 910.0, 915.0, 1000.0):
            assert stream.latestOffset(start, ReadAllAvailable()) == {"t": {"0": 5}}
    assert fake.high_asked == 4  # not at 5.0 or 915.0: within 10 s of the last ask
    assert stream.reportLatestOffset() == {"t": {"0": 9}}  # the pinned range shows as lag
    [record] = caplog.records
    assert "t-0: the last stable offset has stayed at 5 for at least 910 s" in record.message
    assert "kafka-eos txn list --bootstrap-servers k:9092" in record.message


def test_read_uncommitted_never_asks_for_high_watermarks() -> None:
    stream, fake = reader({T0: 5}, **{"kafka.isolation.level": "read_uncommitted"})
    stream.latestOffset({"t": {"0": 0}}, ReadAllAvailable())
    assert fake.high_asked == 0


def test_a_failed_high_watermark_lookup_skips_the_check_and_never_fails_the_query() -> None:
    stream, fake = reader({T0: 5})

    def fail(keys: object) -> dict:
        raise KafkaSourceError("list offsets failed: UNKNOWN_TOPIC_OR_PART")

    fake.high_watermarks = fail  # type: ignore[method-assign]
    assert stream.latestOffset({"t": {"0": 0}}, ReadAllAvailable()) == {"t": {"0": 5}}
