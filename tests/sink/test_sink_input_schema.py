"""The Spark side of the sink, without a session: the input columns it accepts, and the commit
messages the driver accepts from its tasks.

A schema the sink accepts must be written as Spark's Kafka sink would write it; one it rejects
must say which column, its type and the cast that fixes it.
"""

from __future__ import annotations

import pickle

import pyarrow as pa
import pytest
from pyspark.sql.datasource import WriterCommitMessage
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from checkpoint.errors import ConfigError
from checkpoint.model import Committable
from connectors.kafka.sink.records import records_of
from connectors.spark.sink import (
    COMMIT_MESSAGE_VERSION,
    KafkaCommitMessage,
    check_input_schema,
    committables_of,
)


def schema(**columns: DataType) -> StructType:
    return StructType([StructField(name, kind) for name, kind in columns.items()])


HEADER = schema(key=StringType(), value=BinaryType())


def error_of(columns: StructType, topic_option: str | None = "out") -> str:
    with pytest.raises(ConfigError) as caught:
        check_input_schema(columns, topic_option)
    return str(caught.value)


@pytest.mark.parametrize("kind", [StringType(), BinaryType()])
def test_value_and_key_may_be_string_or_binary(kind: DataType) -> None:
    check_input_schema(schema(key=kind, value=kind), "out")


def test_every_column_of_spark_kafka_sink_is_accepted() -> None:
    check_input_schema(
        schema(
            key=BinaryType(),
            value=BinaryType(),
            topic=StringType(),
            partition=IntegerType(),
            headers=ArrayType(HEADER),
            amount_eur=LongType(),  # other columns are ignored
        ),
        None,
    )


def test_value_is_required_and_the_columns_seen_are_listed() -> None:
    message = error_of(schema(key=StringType(), body=StringType()))
    assert "the sink needs a 'value' column (string or binary)" in message
    assert "['key', 'body']" in message


@pytest.mark.parametrize("column", ["value", "key"])
def test_a_non_bytes_column_names_its_type_and_the_cast(column: str) -> None:
    columns = {"value": StringType(), column: LongType()}
    message = error_of(schema(**columns))
    assert f"column '{column}' has type bigint; expected string or binary" in message
    assert f"CAST({column} AS STRING) AS {column}" in message


def test_topic_comes_from_a_column_or_the_option() -> None:
    check_input_schema(schema(value=StringType(), topic=StringType()), None)
    check_input_schema(schema(value=StringType()), "out")
    message = error_of(schema(value=StringType()), topic_option=None)
    assert "needs a 'topic' column (string, or set the option 'topic')" in message


def test_a_binary_topic_column_is_rejected_without_the_option() -> None:
    message = error_of(schema(value=StringType(), topic=BinaryType()), topic_option=None)
    assert "column 'topic' has type binary" in message
    assert "CAST(topic AS STRING) AS topic" in message


def test_the_topic_option_overrides_a_topic_column_of_any_type() -> None:
    """As in Spark's Kafka sink: with the option set, the column is not read at all."""
    check_input_schema(schema(value=StringType(), topic=BinaryType()), "out")


@pytest.mark.parametrize("kind", [LongType(), StringType()])
def test_partition_must_be_int(kind: DataType) -> None:
    message = error_of(schema(value=StringType(), partition=kind))
    assert f"column 'partition' has type {kind.simpleString()}; expected int" in message


@pytest.mark.parametrize(
    "headers",
    [
        ArrayType(schema(key=StringType(), value=StringType())),
        ArrayType(schema(value=BinaryType(), key=StringType())),
        ArrayType(StringType()),
        MapType(StringType(), BinaryType()),
        HEADER,
    ],
)
def test_headers_must_be_an_array_of_key_string_value_binary(headers: DataType) -> None:
    message = error_of(schema(value=StringType(), headers=headers))
    assert f"column 'headers' has type {headers.simpleString()}" in message
    assert "expected array<struct<key:string,value:binary>>" in message


def test_a_column_the_check_accepts_is_the_column_records_are_read_from() -> None:
    accepted = True
    try:
        check_input_schema(schema(Value=StringType()), "out")
    except ConfigError:
        accepted = False
    if accepted:
        batch = pa.RecordBatch.from_pydict({"Value": ["payload"]})
        assert [r.value for r in records_of(batch, "out")] == [b"payload"]


# --- commit messages: what a task hands the driver ---------------------------------------------

WROTE = Committable("q-0", 4001, 2, 10, (("out", 0),))
NOTHING = Committable.nothing_written("q-1")


def test_commit_messages_are_versioned_and_picklable() -> None:
    """Spark pickles them from executors to the driver."""
    message = KafkaCommitMessage(5, WROTE)
    assert message.version == COMMIT_MESSAGE_VERSION
    assert pickle.loads(pickle.dumps(message)) == message


def test_committables_of_keep_the_written_transactions_in_task_order() -> None:
    other = Committable("q-2", 4002, 0, 1)
    messages: list[WriterCommitMessage | None] = [
        KafkaCommitMessage(5, WROTE),
        None,  # a task that failed before returning: Spark hands None
        KafkaCommitMessage(5, NOTHING),  # no input: no transaction to commit
        KafkaCommitMessage(5, other),
    ]
    assert committables_of(messages, 5) == [WROTE, other]


def test_no_message_means_nothing_to_commit() -> None:
    assert committables_of([], 0) == []
    assert committables_of([None, KafkaCommitMessage(0, NOTHING)], 0) == []


@pytest.mark.parametrize(
    "message",
    [
        KafkaCommitMessage(5, WROTE, version=COMMIT_MESSAGE_VERSION + 1),
        KafkaCommitMessage(5, WROTE, version=0),
        WriterCommitMessage(),  # e.g. a flushing writer's message
    ],
    ids=["newer", "older", "foreign"],
)
def test_a_message_of_another_release_is_refused_not_misread(
    message: WriterCommitMessage,
) -> None:
    with pytest.raises(ConfigError) as caught:
        committables_of([KafkaCommitMessage(5, WROTE), message], 5)
    text = str(caught.value)
    assert f"batch 5: a task returned {message!r}" in text
    assert f"not a version {COMMIT_MESSAGE_VERSION} kafka-eos commit message" in text
    assert "must run the same kafka-eos release" in text


def test_a_message_of_another_batch_is_refused() -> None:
    with pytest.raises(ConfigError, match="batch"):
        committables_of([KafkaCommitMessage(4, WROTE)], 5)
