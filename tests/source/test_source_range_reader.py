"""An executor reading one range, against a scripted consumer: which offsets count as lost
when Kafka answers "out of range" or "unknown topic", and which are read. No broker."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, TopicPartition
from kafka_metadata import FakeMetadata, FakeTopic
from pyspark.sql.pandas.types import to_arrow_schema

from connectors.kafka import range_reader, source_client
from connectors.kafka.range_reader import _RangeRead
from connectors.kafka.ranges import OffsetRange
from connectors.kafka.source_errors import DataLossError, KafkaSourceError
from connectors.kafka.source_options import parse_options
from connectors.spark.source import source_schema

BASE = {"kafka.bootstrap.servers": "k:9092", "subscribe": "t"}


class FakeMessage:
    def __init__(self, offset: int, error: KafkaError | None = None) -> None:
        self._offset, self._error = offset, error

    def error(self) -> KafkaError | None:
        return self._error

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
        self._position = -1001

    def assign(self, parts: list[TopicPartition]) -> None:
        self.assigned.append(parts[0].offset)
        self._position = parts[0].offset

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
    parsed = parse_options(opts, streaming=True)
    schema = to_arrow_schema(source_schema(opts), timezone="UTC")
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


def test_a_stall_without_an_end_of_partition_still_fails_after_the_poll_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Nothing arriving for a while proves nothing: only the event ends a stalled range."""
    monkeypatch.setattr(range_reader, "_GONE_CHECK_S", 0.0)
    with pytest.raises(KafkaSourceError, match="made no progress at offset 5"):
        read(FakeConsumer([[*records(0, 3), end_of_partition(5)]]), 0, 9)


def test_tasks_ask_librdkafka_for_end_of_partition_events(monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[dict[str, object]] = []

    class Closable(FakeConsumer):
        def close(self) -> None:
            pass

    def open_consumer(options: object, group_id: str, **settings: object) -> FakeConsumer:
        opened.append(settings)
        return Closable([[*records(0, 3), end_of_partition(9)]])

    monkeypatch.setattr(range_reader, "open_consumer", open_consumer)
    opts = {**BASE, "kafkaConsumer.pollTimeoutMs": "300"}
    schema = to_arrow_schema(source_schema(opts), timezone="UTC")
    batches = range_reader.read_range(
        OffsetRange("t", 0, 0, 9), parse_options(opts, streaming=True), "g", schema
    )
    assert [o for batch in batches for o in batch.column("offset").to_pylist()] == [0, 1, 2]
    assert opened[0] == {"enable.partition.eof": True}
