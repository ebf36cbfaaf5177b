"""An executor reading one range, against a scripted consumer: which offsets count as lost
when Kafka answers "out of range" or "unknown topic", and which are read. No broker."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from kafka_metadata import FakeMetadata, FakeTopic

from connectors.kafka.client_pool import ConsumerPool
from connectors.kafka.source import client as source_client
from connectors.kafka.source import range_reader
from connectors.kafka.source.errors import DataLossError, KafkaSourceError
from connectors.kafka.source.options import SourceOptions
from connectors.kafka.source.range_reader import _RangeRead
from connectors.kafka.source.ranges import OffsetRange
from connectors.spark.compat import arrow_schema
from connectors.spark.source import source_schema

BASE = {"kafka.bootstrap.servers": "k:9092", "subscribe": "t"}


class FakeMessage:
    def __init__(
        self, offset: int, error: KafkaError | None = None, topic: str = "t", partition: int = 0
    ) -> None:
        self._offset, self._error = offset, error
        self._topic, self._partition = topic, partition

    def error(self) -> KafkaError | None:
        return self._error

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes:
        return str(self._offset).encode()

    def value(self) -> bytes:
        return self.key()

    def timestamp(self) -> tuple[int, int]:
        return (1, 0)

    def headers(self) -> None:
        return None


class FakeConsumer:
    """Hands out scripted ``consume`` answers; the position follows the records delivered.

    Metadata answers come from ``topics`` in turn (the last one repeats): the topic's
    metadata, or None for an answer that leaves it out.
    """

    def __init__(
        self,
        answers: list[list[FakeMessage]],
        watermarks: tuple[int, int] = (0, 100),
        topic: FakeTopic | None = None,
        topics: list[FakeTopic | None] | None = None,
    ) -> None:
        self.answers = answers
        self.watermarks = watermarks
        self.topics = topics or [topic or FakeTopic([0])]
        self.metadata_asked = 0
        self.assigned: list[int] = []
        self.unassigned = False
        self._position = -1001

    def assign(self, parts: list[TopicPartition]) -> None:
        self.assigned.append(parts[0].offset)
        self._position = parts[0].offset

    def unassign(self) -> None:
        self.unassigned = True
        self._position = -1001

    def consume(self, count: int, timeout: float) -> list[FakeMessage]:
        answer = self.answers.pop(0) if self.answers else []
        for message in answer:
            if message.error() is None:
                self._position = message.offset() + 1
        return answer

    def position(self, parts: list[TopicPartition]) -> list[TopicPartition]:
        return [TopicPartition(parts[0].topic, parts[0].partition, self._position)]

    def get_watermark_offsets(self, tp: TopicPartition, timeout: float, cached: bool) -> tuple:
        return self.watermarks

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> FakeMetadata:
        found = self.topics[min(self.metadata_asked, len(self.topics) - 1)]
        self.metadata_asked += 1
        return FakeMetadata({"t": found} if found is not None else {})


def records(first: int, end: int) -> list[FakeMessage]:
    return [FakeMessage(offset) for offset in range(first, end)]


def error(code: int) -> FakeMessage:
    return FakeMessage(-1001, KafkaError(code))


def read(consumer: FakeConsumer, start: int, end: int, **options: str) -> list[int]:
    opts = {**BASE, "kafkaConsumer.pollTimeoutMs": "300", **options}
    parsed = SourceOptions.parse(opts, streaming=True)
    schema = arrow_schema(source_schema(opts))
    read = _RangeRead(consumer, OffsetRange("t", 0, start, end), parsed, schema)  # type: ignore[arg-type]
    return [o for batch in read.batches() for o in batch.column("offset").to_pylist()]


@pytest.fixture(autouse=True)
def _quick_confirmation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(source_client, "_GONE_CONFIRM_S", 0.0)
    monkeypatch.setattr(source_client, "_GONE_POLL_S", 0.0)


def test_a_loss_after_records_of_the_same_batch_does_not_claim_them() -> None:
    def consumer() -> FakeConsumer:
        answers = [[*records(0, 5), error(KafkaError._AUTO_OFFSET_RESET)], records(7, 10)]
        return FakeConsumer(answers, watermarks=(7, 10))

    with pytest.raises(DataLossError, match=r"offsets \[5, 7\) of t-0 are no longer available"):
        read(consumer(), 0, 10)
    assert read(consumer(), 0, 10, failOnDataLoss="false") == [0, 1, 2, 3, 4, 7, 8, 9]


def test_out_of_range_inside_the_log_is_retried_not_skipped() -> None:
    """A leader change can answer "out of range" for offsets that exist."""
    answers = [[*records(0, 3), error(KafkaError._AUTO_OFFSET_RESET)], records(3, 10)]
    consumer = FakeConsumer(answers, watermarks=(0, 10))
    assert read(consumer, 0, 10) == list(range(10))
    assert consumer.assigned == [0, 3]


def test_out_of_range_beyond_the_log_end_names_the_missing_range() -> None:
    answers = [[*records(0, 3), error(KafkaError._AUTO_OFFSET_RESET)]]
    consumer = FakeConsumer(answers, watermarks=(0, 3))
    with pytest.raises(DataLossError, match=r"offsets \[3, 10\) of t-0 are beyond its log end 3"):
        read(consumer, 0, 10)


def test_a_deleted_topic_is_data_loss_as_failOnDataLoss_says() -> None:
    def consumer() -> FakeConsumer:
        answers = [[*records(0, 4), error(KafkaError.UNKNOWN_TOPIC_OR_PART)]]
        gone = FakeTopic([], KafkaError.UNKNOWN_TOPIC_OR_PART)
        return FakeConsumer(answers, topic=gone)

    with pytest.raises(DataLossError, match=r"t-0 is gone .* offsets \[4, 10\)"):
        read(consumer(), 0, 10)
    assert read(consumer(), 0, 10, failOnDataLoss="false") == [0, 1, 2, 3]


def test_a_deleted_topic_that_stalls_without_an_error_is_data_loss(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """librdkafka reports nothing for an assigned partition whose topic was deleted: the
    check must come long before kafkaConsumer.pollTimeoutMs."""
    monkeypatch.setattr(range_reader, "_GONE_CHECK_S", 0.0)
    gone = FakeTopic([], KafkaError.UNKNOWN_TOPIC_OR_PART)
    consumer = FakeConsumer([records(0, 4)], topic=gone)
    lenient = {"failOnDataLoss": "false", "kafkaConsumer.pollTimeoutMs": "600000"}
    assert read(consumer, 0, 10, **lenient) == [0, 1, 2, 3]


def test_a_stall_on_a_topic_that_exists_still_fails_after_the_poll_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(range_reader, "_GONE_CHECK_S", 0.0)
    with pytest.raises(KafkaSourceError, match="made no progress at offset 4"):
        read(FakeConsumer([records(0, 4)]), 0, 10)


def test_unknown_partition_that_still_exists_is_read_on() -> None:
    answers = [[*records(0, 4), error(KafkaError.UNKNOWN_TOPIC_OR_PART)], records(4, 10)]
    assert read(FakeConsumer(answers), 0, 10) == list(range(10))


def test_records_after_an_unknown_error_in_the_same_batch_are_read() -> None:
    """The consumer's position is already past them: skipping them would lose them."""
    answers = [[*records(0, 3), error(KafkaError.UNKNOWN_TOPIC_OR_PART), *records(3, 6)]]
    answers.append(records(6, 10))
    assert read(FakeConsumer(answers), 0, 10) == list(range(10))


def test_one_unknown_metadata_answer_is_no_deletion() -> None:
    """A broker that has not learnt of the topic yet answers "unknown" once; the range is
    read on, whatever failOnDataLoss says."""
    answers = [[*records(0, 4), error(KafkaError.UNKNOWN_TOPIC_OR_PART)], records(4, 10)]
    unknown_once = [FakeTopic([], KafkaError.UNKNOWN_TOPIC_OR_PART), FakeTopic([0])]
    consumer = FakeConsumer(answers, topics=unknown_once)  # type: ignore[arg-type]
    assert read(consumer, 0, 10) == list(range(10))
    assert consumer.metadata_asked == 2


def test_a_stall_with_one_unknown_answer_is_no_deletion(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stall check (no error from librdkafka) goes through the same confirmation."""
    monkeypatch.setattr(range_reader, "_GONE_CHECK_S", 0.0)
    left_out_once = [None, FakeTopic([0])]
    consumer = FakeConsumer([records(0, 4), [], records(4, 10)], topics=left_out_once)
    assert read(consumer, 0, 10, failOnDataLoss="false") == list(range(10))
    assert consumer.metadata_asked == 2


def test_a_deletion_is_confirmed_by_several_answers() -> None:
    consumer = FakeConsumer(
        [[*records(0, 4), error(KafkaError.UNKNOWN_TOPIC_OR_PART)]],
        topic=FakeTopic([], KafkaError.UNKNOWN_TOPIC_OR_PART),
    )
    assert read(consumer, 0, 10, failOnDataLoss="false") == [0, 1, 2, 3]
    assert consumer.metadata_asked >= 2 * source_client._GONE_ANSWERS


def end_of_partition(offset: int) -> FakeMessage:
    """librdkafka's end-of-partition event: its fetch position reached the end it may read
    (the last stable offset under read_committed); the consumer's position does not move."""
    return FakeMessage(offset, KafkaError(KafkaError._PARTITION_EOF))


def test_a_range_whose_tail_was_dropped_as_aborted_ends_at_the_end_of_partition() -> None:
    """Offsets 3-8 are aborted records whose marker lies past the last stable offset 9:
    librdkafka drops them and the position stays at 3. Without the event the range would wait
    for the marker and fail after kafkaConsumer.pollTimeoutMs (issue 13, finding 1)."""
    consumer = FakeConsumer([records(0, 3), [], [end_of_partition(9)]])
    assert read(consumer, 0, 9) == [0, 1, 2]
    assert consumer.answers == []


def test_an_end_of_partition_after_records_of_the_same_batch_keeps_them() -> None:
    assert read(FakeConsumer([[*records(0, 3), end_of_partition(9)]]), 0, 9) == [0, 1, 2]


def test_an_end_of_partition_past_the_range_end_ends_it() -> None:
    """The last stable offset moved on after planning; the range still ends at its end."""
    assert read(FakeConsumer([[*records(0, 3), end_of_partition(20)]]), 0, 9) == [0, 1, 2]


def test_an_end_of_partition_below_the_range_end_does_not_end_it() -> None:
    """Everything below the event was fetched, nothing beyond it: the range reads on."""
    answers = [[*records(0, 3), end_of_partition(5)], records(6, 10)]
    assert read(FakeConsumer(answers), 0, 10) == [0, 1, 2, 6, 7, 8, 9]


def test_events_of_another_partition_never_count_for_the_range() -> None:
    """A pooled consumer reads any partition, one range at a time. librdkafka drops what its
    earlier assignment left; were a record or an end event of it to come through, it must not
    end the range early nor be read as one of its records."""
    stray_end = FakeMessage(1000, KafkaError(KafkaError._PARTITION_EOF), topic="other")
    stray_record = FakeMessage(5, topic="t", partition=3)
    answers = [[*records(0, 3), stray_end, stray_record], records(3, 9)]
    assert read(FakeConsumer(answers), 0, 9) == list(range(9))


def test_a_stall_without_an_end_of_partition_still_fails_after_the_poll_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Nothing arriving for a while proves nothing: only the event ends a stalled range."""
    monkeypatch.setattr(range_reader, "_GONE_CHECK_S", 0.0)
    with pytest.raises(KafkaSourceError, match="made no progress at offset 5"):
        read(FakeConsumer([[*records(0, 3), end_of_partition(5)]]), 0, 9)


class _Closable(FakeConsumer):
    def close(self) -> None:
        pass


def read_range_of(
    monkeypatch: pytest.MonkeyPatch, opts: dict[str, str], answer: Callable[[], FakeConsumer]
) -> tuple[list[int], list[dict[str, object]]]:
    """``read_range`` of offsets [0, 9) with every consumer it opens made by ``answer``: the
    offsets read, and the settings each consumer was opened with."""
    opened: list[dict[str, object]] = []

    def open_consumer(options: object, group_id: str, **settings: object) -> FakeConsumer:
        opened.append(settings)
        return answer()

    monkeypatch.setattr(range_reader, "open_consumer", open_consumer)
    schema = arrow_schema(source_schema(opts))
    batches = range_reader.read_range(
        OffsetRange("t", 0, 0, 9),
        SourceOptions.parse(opts, streaming=True),
        "g",
        schema,
        pool=ConsumerPool(capacity=0),
    )
    return [o for batch in batches for o in batch.column("offset").to_pylist()], opened


def test_tasks_ask_librdkafka_for_end_of_partition_events(monkeypatch: pytest.MonkeyPatch) -> None:
    opts = {**BASE, "kafkaConsumer.pollTimeoutMs": "300"}
    read_offsets, opened = read_range_of(
        monkeypatch, opts, lambda: _Closable([[*records(0, 3), end_of_partition(9)]])
    )
    assert read_offsets == [0, 1, 2]
    assert opened[0] == {"enable.partition.eof": True, "fetch.wait.max.ms": 5}


def test_a_users_fetch_wait_max_ms_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    opts = {**BASE, "kafkaConsumer.pollTimeoutMs": "300", "kafka.fetch.wait.max.ms": "250"}
    _, opened = read_range_of(
        monkeypatch, opts, lambda: _Closable([[*records(0, 3), end_of_partition(9)]])
    )
    assert opened[0] == {"enable.partition.eof": True}  # 250 comes with the user's options


# A stall at or past the log end (issue 13, finding 3): the topic recreated with fewer
# records, or its log truncated, below the range end. librdkafka reports nothing: fetching at
# the high watermark is not "out of range", it just waits for offsets that will never come.


class Marks(FakeConsumer):
    """The ``read_uncommitted`` client asking for watermarks: one answer per call (the last one
    repeats); an exception is raised, as a request that failed."""

    def __init__(self, answers: list[tuple[int, int] | Exception]) -> None:
        super().__init__([])
        self.marks = answers
        self.asked = 0
        self.closed = False

    def get_watermark_offsets(self, tp: TopicPartition, timeout: float, cached: bool) -> tuple:
        assert not cached
        answer = self.marks[min(self.asked, len(self.marks) - 1)]
        self.asked += 1
        if isinstance(answer, Exception):
            raise answer
        return answer

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def _quick_stall_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(range_reader, "_GONE_CHECK_S", 0.0)
    monkeypatch.setattr(range_reader, "_ENDED_CONFIRM_S", 0.0)
    monkeypatch.setattr(range_reader, "_ENDED_POLL_S", 0.0)


def read_with_marks(
    consumer: FakeConsumer, marks: Marks, start: int, end: int, **options: str
) -> list[int]:
    opts = {**BASE, "kafkaConsumer.pollTimeoutMs": "600000", **options}
    parsed = SourceOptions.parse(opts, streaming=True)
    schema = arrow_schema(source_schema(opts))
    read = _RangeRead(
        consumer,  # type: ignore[arg-type]
        OffsetRange("t", 0, start, end),
        parsed,
        schema,
        uncommitted=lambda: marks,  # type: ignore[arg-type,return-value]
    )
    return [o for batch in read.batches() for o in batch.column("offset").to_pylist()]


@pytest.mark.usefixtures("_quick_stall_checks")
def test_a_stall_at_a_log_end_below_the_range_end_is_data_loss() -> None:
    """Without the check this waited out kafkaConsumer.pollTimeoutMs (10 min here), then
    failed, at every attempt, whatever failOnDataLoss said."""
    with pytest.raises(
        DataLossError, match=r"offsets \[20, 100\) of t-0 are beyond its log end 20"
    ):
        read_with_marks(FakeConsumer([records(0, 20)]), Marks([(0, 20)]), 0, 100)
    marks = Marks([(0, 20)])
    lenient = read_with_marks(FakeConsumer([records(0, 20)]), marks, 0, 100, failOnDataLoss="false")
    assert lenient == list(range(20))
    assert marks.asked >= range_reader._ENDED_ANSWERS
    assert marks.closed


@pytest.mark.usefixtures("_quick_stall_checks")
def test_a_log_end_that_went_below_the_position_is_data_loss_from_the_position() -> None:
    """A log truncated below records already read: the loss is named from the position."""
    consumer = FakeConsumer([records(0, 30)])
    marks = Marks([(0, 12)])
    assert read_with_marks(consumer, marks, 0, 100, failOnDataLoss="false") == list(range(30))
    with pytest.raises(
        DataLossError, match=r"offsets \[30, 100\) of t-0 are beyond its log end 12"
    ):
        read_with_marks(FakeConsumer([records(0, 30)]), Marks([(0, 12)]), 0, 100)


@pytest.mark.usefixtures("_quick_stall_checks")
def test_a_last_stable_offset_at_the_position_is_no_loss() -> None:
    """Under read_committed the reading consumer's own query gives the last stable offset,
    which an open transaction holds at the position: the high watermark is asked instead,
    of the read_uncommitted client, and it is above. The range waits, and reads on."""
    consumer = FakeConsumer([records(0, 4), [], [], records(4, 10)], watermarks=(0, 4))
    marks = Marks([(0, 10)])
    assert read_with_marks(consumer, marks, 0, 10) == list(range(10))
    assert marks.asked >= 1


@pytest.mark.usefixtures("_quick_stall_checks")
@pytest.mark.parametrize(
    "answers",
    [
        [(0, 4), (0, 10)],  # one answer at the position, the next above it
        [(0, 4), (0, 4), KafkaException(KafkaError(KafkaError._TIMED_OUT))],  # a broker away
        [(-1001, -1001)],  # no answer
    ],
    ids=["flapping", "failed-request", "no-answer"],
)
def test_an_unconfirmed_log_end_is_no_loss(answers: list) -> None:
    """Fewer than _ENDED_ANSWERS answers at or below the position, in a row, confirm
    nothing, whatever failOnDataLoss says: the range reads on."""
    consumer = FakeConsumer([records(0, 4), [], records(4, 10)])
    assert read_with_marks(consumer, Marks(answers), 0, 10, failOnDataLoss="false") == list(
        range(10)
    )


@pytest.mark.usefixtures("_quick_stall_checks")
def test_a_log_end_is_confirmed_by_several_answers_over_seconds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(range_reader, "_ENDED_CONFIRM_S", 0.2)
    monkeypatch.setattr(range_reader, "_ENDED_POLL_S", 0.05)
    marks = Marks([(0, 4)])
    started = time.monotonic()
    read_with_marks(FakeConsumer([records(0, 4)]), marks, 0, 10, failOnDataLoss="false")
    assert time.monotonic() - started >= 0.2
    assert marks.asked >= range_reader._ENDED_ANSWERS


@pytest.mark.usefixtures("_quick_stall_checks")
def test_a_stall_below_the_log_end_still_fails_after_the_poll_timeout() -> None:
    """The high watermark above the position: the offsets exist, the broker is slow."""
    with pytest.raises(KafkaSourceError, match="made no progress at offset 4"):
        read_with_marks(
            FakeConsumer([records(0, 4)]),
            Marks([(0, 100)]),
            0,
            10,
            **{"kafkaConsumer.pollTimeoutMs": "300"},
        )


def test_out_of_range_is_measured_against_the_high_watermark() -> None:
    """ "Out of range" at the last stable offset (an open transaction there, and a leader
    change) is retried: the offsets are below the high watermark."""
    answers = [[*records(0, 3), error(KafkaError._AUTO_OFFSET_RESET)], records(3, 10)]
    consumer = FakeConsumer(answers, watermarks=(0, 3))
    assert read_with_marks(consumer, Marks([(0, 10)]), 0, 10) == list(range(10))
    assert consumer.assigned == [0, 3]


@pytest.mark.parametrize(
    ("isolation", "uncommitted"), [("read_committed", True), ("read_uncommitted", False)]
)
def test_tasks_ask_for_the_high_watermark_read_uncommitted(
    monkeypatch: pytest.MonkeyPatch, isolation: str, uncommitted: bool
) -> None:
    monkeypatch.setattr(range_reader, "_GONE_CHECK_S", 0.0)
    monkeypatch.setattr(range_reader, "_ENDED_CONFIRM_S", 0.0)
    opts = {
        **BASE,
        "kafkaConsumer.pollTimeoutMs": "600000",
        "kafka.isolation.level": isolation,
        "failOnDataLoss": "false",
    }
    read_offsets, opened = read_range_of(
        monkeypatch, opts, lambda: _Closable([records(0, 3)], watermarks=(0, 3))
    )
    assert read_offsets == [0, 1, 2]
    marks = [s for s in opened if s.get("isolation.level") == "read_uncommitted"]
    assert len(marks) == (1 if uncommitted else 0)
