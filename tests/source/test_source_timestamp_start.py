"""Timestamp starts under read_committed (issue 13, finding 7), against a scripted log.

A broker asked under READ_COMMITTED answers "no offset" for a timestamp whose first match lies
at or beyond the last stable offset (LSO); under READ_UNCOMMITTED it answers the match, up to
the high watermark (checked on Kafka 4.3.1 by
``integration_tests/source/test_source_timestamp_read_committed.py``). No broker here.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from confluent_kafka import TopicPartition
from kafka_metadata import DescribesTopics, FakeMetadata, FakeTopic

from connectors.kafka.source.errors import SourceOptionError
from connectors.kafka.source.offset_reader import KafkaOffsetReader, start_by_timestamp
from connectors.kafka.source.offsets import PartitionKey
from connectors.kafka.source.options import SourceOptions

T = 1_000_000


class Log:
    """Per partition: the LSO, the high watermark, and the first offset whose record has a
    timestamp at or after ``T`` (None: no such record up to the high watermark)."""

    def __init__(self, lso: dict, high: dict, match: dict) -> None:
        self.lso, self.high, self.match = lso, high, match


class TimedConsumer(DescribesTopics):
    """Answers ListOffsets the way a broker does under its isolation level."""

    def __init__(self, log: Log, isolation: str) -> None:
        self.log, self.isolation = log, isolation
        self.asked: list[list[tuple[PartitionKey, int]]] = []

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> FakeMetadata:
        topics = {"t": FakeTopic(sorted(p for _, p in self.log.high))}
        return FakeMetadata(topics if topic is None else {topic: topics["t"]})

    def offsets_for_times(self, request: list[TopicPartition], timeout: float) -> list:
        self.asked.append([((tp.topic, tp.partition), tp.offset) for tp in request])
        cap = self.log.lso if self.isolation == "read_committed" else self.log.high
        answer = []
        for tp in request:
            key = (tp.topic, tp.partition)
            if tp.offset == -1:
                offset = cap[key]
            elif tp.offset == -2:
                offset = 0
            else:
                assert tp.offset == T
                found = self.log.match.get(key)
                offset = found if found is not None and found < cap[key] else -1
            answer.append(
                SimpleNamespace(topic=tp.topic, partition=tp.partition, offset=offset, error=None)
            )
        return answer


# Partition 0: the match is the LSO (the first record of an open transaction). Partition 1:
# the match lies beyond the LSO. Partition 2: the match is committed, below the LSO.
LOG = Log(
    lso={("t", 0): 5, ("t", 1): 0, ("t", 2): 9},
    high={("t", 0): 8, ("t", 1): 6, ("t", 2): 9},
    match={("t", 0): 5, ("t", 1): 4, ("t", 2): 3},
)
KEYS = [("t", 0), ("t", 1), ("t", 2)]


def reader(
    log: Log, *, streaming: bool = True, **options: str
) -> tuple[KafkaOffsetReader, TimedConsumer, TimedConsumer]:
    opts = {
        "kafka.bootstrap.servers": "k:9092",
        "kafka.default.api.timeout.ms": "3000",
        "subscribe": "t",
        "startingTimestamp": str(T),
        **options,
    }
    parsed = SourceOptions.parse(opts, streaming=streaming)
    kafka = KafkaOffsetReader(parsed, "g")
    committed = TimedConsumer(log, parsed.isolation_level)
    uncommitted = TimedConsumer(log, "read_uncommitted")
    kafka._consumer = committed  # type: ignore[assignment]
    kafka._admin_client = committed  # type: ignore[assignment]
    kafka._uncommitted = uncommitted  # type: ignore[assignment]
    return kafka, committed, uncommitted


def test_a_stream_starts_at_the_first_match_even_at_or_beyond_the_lso() -> None:
    kafka, committed, _ = reader(LOG)
    start = kafka.resolve(kafka._options.starting, KEYS, keep_latest=True)
    assert start == {("t", 0): 5, ("t", 1): 4, ("t", 2): 3}
    assert committed.asked == [], "the timestamp was looked up under read_committed"


def test_a_batch_read_starts_a_match_beyond_the_lso_at_the_lso() -> None:
    """A batch ends at the LSO at most: such a partition reads nothing, instead of failing."""
    kafka, _, _ = reader(LOG, streaming=False)
    start = kafka.resolve(kafka._options.starting, KEYS)
    assert start == {("t", 0): 5, ("t", 1): 0, ("t", 2): 3}


@pytest.mark.parametrize("streaming", [True, False])
def test_no_match_up_to_the_high_watermark_follows_the_strategy(streaming: bool) -> None:
    log = Log(LOG.lso, LOG.high, {**LOG.match, ("t", 1): None})
    kafka, _, _ = reader(log, streaming=streaming)
    with pytest.raises(SourceOptionError, match=r"startingTimestamp='t-1=1000000'.*no record"):
        kafka.resolve(kafka._options.starting, KEYS, keep_latest=streaming)
    kafka, _, _ = reader(log, streaming=streaming, startingOffsetsByTimestampStrategy="latest")
    start = kafka.resolve(kafka._options.starting, KEYS, keep_latest=streaming)
    assert start[("t", 1)] == (-1 if streaming else 0)  # latest: the LSO, pinned by batch 0


def test_ending_timestamps_keep_the_query_isolation_level() -> None:
    kafka, _, uncommitted = reader(LOG, streaming=False, endingTimestamp=str(T))
    end = kafka.resolve(kafka._options.ending, KEYS)
    assert end == {("t", 0): 5, ("t", 1): 0, ("t", 2): 3}  # no match below the LSO: latest
    assert uncommitted.asked == []


def test_a_read_uncommitted_query_needs_no_second_consumer() -> None:
    kafka, committed, _ = reader(LOG, **{"kafka.isolation.level": "read_uncommitted"})
    kafka._uncommitted = None
    start = kafka.resolve(kafka._options.starting, KEYS, keep_latest=True)
    assert start == {("t", 0): 5, ("t", 1): 4, ("t", 2): 3}
    assert kafka._uncommitted is None and committed.asked


def test_a_start_beyond_the_lso_waits_there_instead_of_going_back() -> None:
    """The end of a stream batch from a start above the LSO is that start (nothing to read
    yet), not the LSO, which planning would report as a log that went back."""
    kafka, _, _ = reader(LOG)
    latest, held = kafka.latest_since({("t", 0): 5, ("t", 1): 4, ("t", 2): 3})
    assert (latest, held) == ({("t", 0): 5, ("t", 1): 4, ("t", 2): 9}, {})
    committed_later = Log({**LOG.lso, ("t", 1): 6}, LOG.high, LOG.match)
    kafka, _, _ = reader(committed_later)
    assert kafka.latest_since({("t", 1): 4})[0][("t", 1)] == 6


def test_a_start_beyond_the_high_watermark_did_go_back() -> None:
    kafka, _, uncommitted = reader(LOG)
    latest, _ = kafka.latest_since({("t", 0): 5, ("t", 1): 7, ("t", 2): 3})
    assert latest[("t", 1)] == 0  # below the start: reported as data loss by planning
    assert uncommitted.asked == [[(("t", 1), -1)]]


def test_a_start_at_or_below_the_lso_asks_nothing_more() -> None:
    kafka, committed, uncommitted = reader(LOG)
    kafka.latest_since({("t", 0): 5, ("t", 1): 0, ("t", 2): 9})
    assert uncommitted.asked == [] and len(committed.asked) == 1


def test_start_by_timestamp_caps_a_match_at_the_batch_end() -> None:
    found = {("t", 0): 5, ("t", 1): 9, ("t", 2): -1, ("t", 3): 2}
    end = {("t", 0): 7, ("t", 1): 4, ("t", 3): 2}
    assert start_by_timestamp(found, end) == {("t", 0): 5, ("t", 1): 4, ("t", 2): -1, ("t", 3): 2}
