"""Records near 1 MiB through the exactly-once writer with the sink's parsed producer config
(``message.max.bytes`` defaults to 1,048,527), on a broker at its default
``max.message.bytes`` (1,048,588 a record batch): what Java's producer takes by default is
written and committed; a record whose batch the broker would refuse is refused by the producer
itself, before it is sent, with the limit and the fix. The producer does not depend on the
broker's transaction version: the default Kafka only."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from checkpoint.errors import ConfigError
from connectors.kafka.sink.committer import KafkaCommitter
from connectors.kafka.sink.exactly_once_writer import ExactlyOnceWriter
from connectors.kafka.sink.options import SinkOptions
from integration_tests.conftest import create_topic
from integration_tests.sink.conftest import default_version_only
from integration_tests.sink.transactions import commit_visibly
from kafka_eos.cluster import KafkaCluster
from kafka_eos.operations.drain import drain

pytestmark = pytest.mark.kafka

JAVAS_LARGEST = 1_048_489  # no key: 61 + 21 + 1 + 3 + value + 1 = Java's max.request.size


def _producer_config(bootstrap: str, tmp_path: Path) -> dict[str, Any]:
    options = {"kafka.bootstrap.servers": bootstrap, "checkpointLocation": str(tmp_path)}
    return SinkOptions.parse(options).producer_config


@default_version_only
def test_large_records_are_written_in_one_transaction_and_committed(
    versioned_kafka: KafkaCluster, tmp_path: Path
) -> None:
    bootstrap = versioned_kafka.bootstrap_servers
    topic = create_topic(bootstrap)
    config = _producer_config(bootstrap, tmp_path)
    writer = ExactlyOnceWriter(config, topic, [f"large-{uuid.uuid4().hex[:8]}-0"], timeout_s=60)
    values = [b"a" * 1_048_000, *(bytes([66 + i]) * 600_000 for i in range(4)), b"z" * 1_048_000]
    values.append(b"j" * JAVAS_LARGEST)
    batch = pa.RecordBatch.from_pydict({"value": values})

    committable = writer.write_and_pre_commit(0, [batch])
    committer = KafkaCommitter(config, timeout_s=60)
    try:
        commit_visibly(committer, committable)
    finally:
        committer.close()

    written = drain(bootstrap, topic, "read_committed", timeout_s=60)
    assert [r.value for r in written] == values


@default_version_only
def test_a_record_whose_batch_the_broker_refuses_is_refused_before_it_is_sent(
    versioned_kafka: KafkaCluster, tmp_path: Path
) -> None:
    """1,048,530 bytes: a batch of 1,048,602. At message.max.bytes 1,048,576 the producer took
    it and the broker refused it in the delivery report, the error saying to raise
    kafka.message.max.bytes."""
    bootstrap = versioned_kafka.bootstrap_servers
    topic = create_topic(bootstrap)
    config = _producer_config(bootstrap, tmp_path)
    writer = ExactlyOnceWriter(config, topic, [f"edge-{uuid.uuid4().hex[:8]}-0"], timeout_s=60)
    batch = pa.RecordBatch.from_pydict({"value": [b"small", b"x" * 1_048_530]})

    with pytest.raises(ConfigError) as caught:
        writer.write_and_pre_commit(0, [batch])

    message = str(caught.value)
    assert "1048530 bytes (key + value)" in message
    assert "above the producer's message.max.bytes = 1048527" in message
    assert "Nothing of this batch is visible" in message
    assert drain(bootstrap, topic, "read_committed", timeout_s=60) == []
