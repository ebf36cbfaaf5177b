"""Arrow rows to Kafka records, with the columns of Spark's Kafka sink.

A row must become exactly the record Spark's own sink would write: the same bytes, the same
target, and a loud error (never a silently skipped row) when it cannot be written.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from checkpoint.errors import ConfigError
from connectors.kafka.sink.records import (
    ANY_PARTITION,
    KafkaRecord,
    ProduceBatch,
    carries_headers,
    produce_batches,
    records_of,
)

HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def test_string_key_and_value_become_utf8_bytes() -> None:
    batch = pa.RecordBatch.from_pydict({"key": ["k1", "ü"], "value": ["v1", "€"]})
    assert list(records_of(batch, "out")) == [
        KafkaRecord("out", b"v1", b"k1", None, None),
        KafkaRecord("out", "€".encode(), "ü".encode(), None, None),
    ]


def test_binary_key_and_value_are_written_as_they_are() -> None:
    batch = pa.RecordBatch.from_pydict(
        {"key": pa.array([b"\x00\xff"], pa.binary()), "value": pa.array([b"\x01"], pa.binary())}
    )
    assert list(records_of(batch, "out")) == [KafkaRecord("out", b"\x01", b"\x00\xff", None, None)]


def test_null_key_null_value_and_no_key_column() -> None:
    with_nulls = pa.RecordBatch.from_pydict(
        {"key": pa.array([None], pa.string()), "value": pa.array([None], pa.binary())}
    )
    assert list(records_of(with_nulls, "out")) == [KafkaRecord("out", None, None, None, None)]
    value_only = pa.RecordBatch.from_pydict({"value": ["v"]})
    assert [r.key for r in records_of(value_only, "out")] == [None]


def test_topic_column_routes_each_row() -> None:
    batch = pa.RecordBatch.from_pydict({"topic": ["a", "b"], "value": ["1", "2"]})
    assert [(r.topic, r.value) for r in records_of(batch, None)] == [("a", b"1"), ("b", b"2")]


def test_the_topic_option_wins_over_the_topic_column() -> None:
    """As in Spark's Kafka sink: the option overrides the column."""
    batch = pa.RecordBatch.from_pydict({"topic": ["a", None], "value": ["1", "2"]})
    assert [r.topic for r in records_of(batch, "forced")] == ["forced", "forced"]


@pytest.mark.parametrize("topic", [None, ""])
def test_a_row_without_topic_names_the_row_and_the_fix(topic: str | None) -> None:
    batch = pa.RecordBatch.from_pydict(
        {"topic": pa.array(["a", topic], pa.string()), "value": ["1", "2"]}
    )
    records = records_of(batch, None)
    assert next(records).topic == "a"
    with pytest.raises(ConfigError) as caught:
        next(records)
    message = str(caught.value)
    assert f"row 1 of the batch has topic {topic!r}" in message
    assert "set the sink option 'topic'" in message


def test_no_topic_anywhere_fails_at_the_first_row() -> None:
    with pytest.raises(ConfigError, match="row 0"):
        list(records_of(pa.RecordBatch.from_pydict({"value": ["v"]}), None))


def test_partition_column_pins_rows_and_null_lets_the_partitioner_choose() -> None:
    batch = pa.RecordBatch.from_pydict(
        {"value": ["a", "b"], "partition": pa.array([3, None], pa.int32())}
    )
    assert [r.partition for r in records_of(batch, "out")] == [3, None]


def test_headers_column_becomes_key_value_pairs_in_order() -> None:
    headers = pa.array(
        [[{"key": "trace", "value": b"t1"}, {"key": "empty", "value": None}], None, []],
        HEADERS,
    )
    batch = pa.RecordBatch.from_pydict({"value": ["a", "b", "c"], "headers": headers})
    assert [r.headers for r in records_of(batch, "out")] == [
        [("trace", b"t1"), ("empty", None)],
        None,
        [],
    ]


def test_other_columns_are_ignored() -> None:
    batch = pa.RecordBatch.from_pydict({"value": ["v"], "amount_eur": [12.5], "timestamp": [1]})
    assert list(records_of(batch, "out")) == [KafkaRecord("out", b"v", None, None, None)]


def test_an_empty_batch_has_no_records() -> None:
    batch = pa.RecordBatch.from_pydict({"value": pa.array([], pa.string())})
    assert list(records_of(batch, "out")) == []


# The fast path: a batch without headers goes to produce_batch, one call per topic and
# partition. confluent-kafka's produce_batch takes the partition for the whole call and
# ignores a message's own, so pinned rows must be split into calls, in row order.


def test_unpinned_rows_of_the_topic_option_are_one_call_to_any_partition() -> None:
    batch = pa.RecordBatch.from_pydict(
        {"key": pa.array(["k0", None], pa.string()), "value": pa.array([b"v0", None], pa.binary())}
    )
    messages = [{"value": b"v0", "key": "k0"}, {"value": None, "key": None}]
    assert produce_batches(batch, "out") == [ProduceBatch("out", ANY_PARTITION, messages)]


def test_pinned_rows_are_cut_into_calls_where_their_partition_changes() -> None:
    batch = pa.RecordBatch.from_pydict(
        {"value": ["a", "b", "c", "d"], "partition": pa.array([2, 2, None, 2], pa.int32())}
    )
    calls = produce_batches(batch, "out")
    assert [(c.partition, [m["value"] for m in c.messages]) for c in calls] == [
        (2, ["a", "b"]),
        (ANY_PARTITION, ["c"]),
        (2, ["d"]),  # after "c": a partition's rows stay in row order
    ]
    assert all("partition" not in m for c in calls for m in c.messages)  # ignored if given


def test_calls_follow_the_topic_column_each_topic_in_row_order() -> None:
    batch = pa.RecordBatch.from_pydict({"topic": ["a", "b", "a"], "value": ["1", "2", "3"]})
    assert [(c.topic, [m["value"] for m in c.messages]) for c in produce_batches(batch, None)] == [
        ("a", ["1", "3"]),
        ("b", ["2"]),
    ]
    assert [c.topic for c in produce_batches(batch, "forced")] == ["forced"]


def test_a_row_without_topic_fails_the_batch_before_any_call() -> None:
    batch = pa.RecordBatch.from_pydict(
        {"topic": pa.array(["a", None], pa.string()), "value": ["1", "2"]}
    )
    with pytest.raises(ConfigError, match=r"row 1 of the batch has topic None"):
        produce_batches(batch, None)


def test_only_a_batch_with_a_header_takes_the_record_by_record_path() -> None:
    def batch(headers: list[object]) -> pa.RecordBatch:
        column = pa.array(headers, HEADERS)
        return pa.RecordBatch.from_pydict({"value": ["v"] * len(headers), "headers": column})

    assert not carries_headers(pa.RecordBatch.from_pydict({"value": ["v"]}))
    assert not carries_headers(batch([None, []]))
    assert carries_headers(batch([None, [{"key": "h", "value": b"1"}]]))
