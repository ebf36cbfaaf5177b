"""Kafka metadata that lies exactly once, on top of a real broker.

:class:`LyingConsumer` wraps a real confluent-kafka consumer: one ``list_topics`` answer leaves
a topic out (a listing of all topics) or calls it unknown (a lookup by name; :class:`LyingAdmin`
does the same to a ``describe_topics`` answer), as a broker that
has not learnt of the topic yet, or a brief ACL change, would; one ``consume`` can carry an
"unknown topic or partition" error between real records. Every other call, and every record,
is the real Kafka's.

A lie is armed by a file, so that the test process can arm it for a reader running in one of
Spark's Python workers: the first call that removes the file (``os.unlink`` succeeds for one
caller only) tells the lie and appends what it did to ``<file>.told``.

``format("kafka-eos-lying")`` is ``kafka-eos`` with the driver's metadata consumer, and every
task's consumer, wrapped this way. Its extra options: ``lie.topic`` (the topic to lie about),
``lie.driver`` (the switch of one lying listing on the driver), ``lie.task`` (the switch of one
injected error, followed by one lying metadata answer, in a task).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import TopicMetadata
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from connectors.kafka.source import range_reader
from connectors.kafka.source.offset_reader import KafkaOffsetReader
from connectors.spark.source import KafkaStreamReader, source_schema

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType


def claim(switch: str | None) -> bool:
    """Whether this caller disarmed ``switch``: true for exactly one caller per arming."""
    if not switch:
        return False
    try:
        os.unlink(switch)
    except FileNotFoundError:
        return False
    return True


def told(switch: str) -> list[str]:
    """What the lies armed by ``switch`` did, one line each."""
    path = Path(f"{switch}.told")
    return path.read_text().splitlines() if path.exists() else []


def _tell(switch: str, what: str) -> None:
    with open(f"{switch}.told", "a") as log:
        log.write(f"{what}\n")


class _Unknown:
    """An error event, as ``consume`` returns one: "unknown topic or partition", of the
    partition being read (librdkafka names it, as it names any partition's error)."""

    def __init__(self, topic: str, partition: int) -> None:
        self._topic, self._partition = topic, partition

    def error(self) -> KafkaError:
        return KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition


class LyingConsumer:
    """A real consumer whose next ``list_topics`` after ``metadata_switch`` is claimed says
    ``topic`` does not exist; ``consume_switch`` puts an "unknown" error in the middle of one
    ``consume`` answer and arms one lying metadata answer after it."""

    def __init__(
        self,
        consumer: Any,
        topic: str,
        *,
        metadata_switch: str | None = None,
        consume_switch: str | None = None,
    ) -> None:
        self._consumer = consumer
        self._topic = topic
        self._metadata_switch = metadata_switch
        self._consume_switch = consume_switch
        self._lie_next = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._consumer, name)

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        if topic is None:
            answer = self._consumer.list_topics(timeout=timeout)
        else:
            answer = self._consumer.list_topics(topic, timeout=timeout)
        if self._topic not in answer.topics or not self._lie():
            return answer
        lie = copy.copy(answer)
        lie.topics = dict(answer.topics)
        if topic is None:
            del lie.topics[self._topic]
            what = f"left {self._topic} out of a listing of all topics"
        else:
            unknown = TopicMetadata()
            unknown.topic, unknown.error = topic, KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)
            lie.topics[topic] = unknown
            what = f"answered UNKNOWN_TOPIC_OR_PART for {topic}"
        _tell(self._metadata_switch or self._consume_switch or "", what)
        return lie

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Any]:
        messages = self._consumer.consume(num_messages, timeout=timeout)
        if len(messages) < 2 or not claim(self._consume_switch):
            return messages
        self._lie_next = True
        middle = len(messages) // 2
        _tell(
            self._consume_switch or "",
            f"put UNKNOWN_TOPIC_OR_PART between offsets {messages[middle - 1].offset()} and "
            f"{messages[middle].offset()} of {self._topic}",
        )
        unknown = _Unknown(messages[middle].topic(), messages[middle].partition())
        return [*messages[:middle], unknown, *messages[middle:]]

    def _lie(self) -> bool:
        if self._lie_next:
            self._lie_next = False
            return True
        return claim(self._metadata_switch)


class LyingAdmin:
    """A real admin client whose next ``describe_topics`` after ``switch`` is claimed says
    ``topic`` does not exist, as :class:`LyingConsumer` does for a lookup by name."""

    def __init__(self, admin: Any, topic: str, switch: str | None) -> None:
        self._admin, self._topic, self._switch = admin, topic, switch

    def __getattr__(self, name: str) -> Any:
        return getattr(self._admin, name)

    def describe_topics(self, topics: Any, **kwargs: Any) -> dict[str, Future]:
        answers = self._admin.describe_topics(topics, **kwargs)
        if self._topic not in answers or not claim(self._switch):
            return answers
        unknown: Future = Future()
        unknown.set_exception(KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)))
        _tell(self._switch or "", f"answered UNKNOWN_TOPIC_OR_PART for {self._topic}")
        return {**answers, self._topic: unknown}


class _LyingOffsetReader(KafkaOffsetReader):
    def __init__(self, reader: KafkaOffsetReader, topic: str, switch: str | None) -> None:
        super().__init__(reader._options, reader._group_id)
        self._lie_topic, self._lie_switch = topic, switch

    def _client(self) -> Any:
        return LyingConsumer(super()._client(), self._lie_topic, metadata_switch=self._lie_switch)

    def _admin(self) -> Any:
        return LyingAdmin(super()._admin(), self._lie_topic, self._lie_switch)


class _LyingStreamReader(KafkaStreamReader):
    def __init__(self, options: Mapping[str, str], schema: StructType, lies: dict) -> None:
        super().__init__(options, schema)
        self._lies = lies
        self._planner.kafka = _LyingOffsetReader(
            self._planner.kafka, lies["topic"], lies.get("driver")
        )

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        real = range_reader.open_consumer
        topic, switch = self._lies["topic"], self._lies.get("task")

        def lying_consumer(*args: Any, **kwargs: Any) -> LyingConsumer:
            return LyingConsumer(real(*args, **kwargs), topic, consume_switch=switch)

        range_reader.open_consumer = lying_consumer
        try:
            yield from super().read(partition)
        finally:
            range_reader.open_consumer = real


class LyingKafkaSource(DataSource):
    """``format("kafka-eos-lying")``: the kafka-eos source over lying metadata answers."""

    @classmethod
    def name(cls) -> str:
        return "kafka-eos-lying"

    def _split(self) -> tuple[dict[str, str], dict[str, str]]:
        options, lies = {}, {}
        for key, value in self.options.items():
            if key.lower().startswith("lie."):
                lies[key.lower()[len("lie.") :]] = value
            else:
                options[key] = value
        return options, lies

    def schema(self) -> StructType:
        return source_schema(self._split()[0])

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        options, lies = self._split()
        return _LyingStreamReader(options, schema, lies)
