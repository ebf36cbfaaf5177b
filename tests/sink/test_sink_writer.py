"""The writer's failures that need no broker: a record above ``message.max.bytes`` is refused
by the producer before it is sent, and must stop the task with the size, the limit and the fix
(a DeliveryFailed would make Spark retry a task that can never succeed)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from checkpoint.errors import ConfigError
from connectors.kafka.sink.writer import AtLeastOnceWriter, NoGuaranteeWriter

# Nothing listens on port 9: the producer never reaches a broker, and does not need to.
UNREACHABLE = {"bootstrap.servers": "127.0.0.1:9", "log_level": 0}


HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
HEADER = pa.array([[{"key": "h", "value": b"1"}]], HEADERS)


@pytest.mark.parametrize("writer_class", [AtLeastOnceWriter, NoGuaranteeWriter])
@pytest.mark.parametrize("headers", [False, True], ids=["produce_batch", "record-by-record"])
def test_an_oversized_record_names_its_size_the_limit_and_the_fix(
    writer_class: type[AtLeastOnceWriter] | type[NoGuaranteeWriter], headers: bool
) -> None:
    """Both paths: a batch without headers goes through produce_batch, one with them record by
    record; the refusal reads the same."""
    columns = {"key": ["k"], "value": [b"x" * 5_000]}
    batch = pa.RecordBatch.from_pydict({**columns, **({"headers": HEADER} if headers else {})})
    writer = writer_class({**UNREACHABLE, "message.max.bytes": 2_000}, "out", 1.0)
    with pytest.raises(ConfigError) as caught:
        writer.write_and_flush([batch])
    message = str(caught.value)
    assert "a record for topic out is 5001 bytes (key + value)" in message
    assert "message.max.bytes = 2000" in message
    assert "Raise kafka.message.max.bytes" in message and "max.message.bytes" in message
    # Without a transaction, earlier records of the task are not taken back: say so.
    assert "may already be visible" in message
    assert writer.record_count == 0


def test_the_default_limit_is_named_when_the_user_set_none() -> None:
    batch = pa.RecordBatch.from_pydict({"value": [b"x" * 1_100_000]})
    writer = NoGuaranteeWriter(UNREACHABLE, "out", 1.0)
    with pytest.raises(ConfigError, match=r"1000000 \(librdkafka's default\)"):
        writer.write_and_flush([batch])


def test_an_empty_input_opens_no_producer() -> None:
    """No producer, so nothing to flush: an idle task must not wait on an absent broker."""
    writer = NoGuaranteeWriter(UNREACHABLE, "out", 1.0)
    empty = pa.RecordBatch.from_pydict({"value": pa.array([], pa.string())})
    assert writer.write_and_flush([empty, empty]) == 0
    assert writer._producer is None


@pytest.mark.parametrize("writer_class", [AtLeastOnceWriter, NoGuaranteeWriter])
def test_a_tasks_producer_connects_at_once_unless_the_user_says_otherwise(
    writer_class: type[AtLeastOnceWriter] | type[NoGuaranteeWriter],
) -> None:
    """With sparse connections an idempotent producer's first producer-id lookup finds no
    broker connected and waits 50-500 ms: a wait per task (the exactly-once writer's
    transactional producer had the same default already)."""
    assert (
        writer_class(UNREACHABLE, "out", 1.0)._producer_config({})["enable.sparse.connections"]
        is False
    )
    own = writer_class({**UNREACHABLE, "enable.sparse.connections": True}, "out", 1.0)
    assert own._producer_config({})["enable.sparse.connections"] is True


@pytest.mark.parametrize("writer_class", [AtLeastOnceWriter, NoGuaranteeWriter])
def test_a_row_without_a_partition_goes_where_sparks_sink_puts_it_unless_the_user_says_otherwise(
    writer_class: type[AtLeastOnceWriter] | type[NoGuaranteeWriter],
) -> None:
    """Spark's sink uses the Java producer's default partitioner (murmur2 of the key):
    librdkafka's murmur2_random, not its own default consistent_random (CRC32)."""
    assert writer_class(UNREACHABLE, "out", 1.0)._producer_config({})["partitioner"] == (
        "murmur2_random"
    )
    own = writer_class({**UNREACHABLE, "partitioner": "consistent_random"}, "out", 1.0)
    assert own._producer_config({})["partitioner"] == "consistent_random"
