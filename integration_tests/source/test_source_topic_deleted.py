"""A topic deleted while a task reads it is data loss, as ``failOnDataLoss`` says, and is
reported promptly instead of after ``kafkaConsumer.pollTimeoutMs`` as a plain error.

Fault injected: ``AdminClient.delete_topics`` while an executor's range reader waits at the
end of the records (its range ends beyond them), on real Kafka; no Spark needed.
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient
from pyspark.sql.pandas.types import to_arrow_schema

from connectors.kafka.range_reader import read_range
from connectors.kafka.ranges import OffsetRange
from connectors.kafka.source_errors import DataLossError
from connectors.kafka.source_options import parse_options
from connectors.spark.source import source_schema
from integration_tests.source.conftest import produce
from kafka_eos.cluster import KafkaCluster

pytestmark = [pytest.mark.kafka]

_POLL_TIMEOUT_MS = 60_000


def _read_while_deleted(bootstrap: str, topic: str, fail_on_data_loss: str) -> list[int]:
    opts = {
        "kafka.bootstrap.servers": bootstrap,
        "subscribe": topic,
        "failOnDataLoss": fail_on_data_loss,
        "kafkaConsumer.pollTimeoutMs": str(_POLL_TIMEOUT_MS),
    }
    options = parse_options(opts, streaming=False)
    schema = to_arrow_schema(source_schema(opts), timezone="UTC")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deleter = threading.Timer(2.0, lambda: admin.delete_topics([topic]))
    deleter.start()
    started = time.monotonic()
    try:
        batches = read_range(OffsetRange(topic, 0, 0, 200), options, f"g-{uuid.uuid4()}", schema)
        return [o for batch in batches for o in batch.column("offset").to_pylist()]
    finally:
        deleter.join()
        elapsed = time.monotonic() - started
        assert elapsed < _POLL_TIMEOUT_MS / 2000, f"reported after {elapsed:.0f} s"


@pytest.mark.parametrize("fail_on_data_loss", ["true", "false"])
def test_a_topic_deleted_during_a_read_is_data_loss(
    kafka: KafkaCluster, topic_factory, fail_on_data_loss: str
) -> None:
    bootstrap, topic = kafka.bootstrap_servers, topic_factory(partitions=1)
    produce(bootstrap, topic, range(100), partition=0)
    if fail_on_data_loss == "true":
        with pytest.raises(DataLossError, match=rf"{topic}-0 is gone .*\[100, 200\)"):
            _read_while_deleted(bootstrap, topic, fail_on_data_loss)
    else:
        assert _read_while_deleted(bootstrap, topic, fail_on_data_loss) == list(range(100))
