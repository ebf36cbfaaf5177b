"""``kafka-eos verify`` against a real broker: output topics holding each input's result
exactly once, one result twice (a replayed write), one result lost, and one with an open
transaction of the pipeline (output not final)."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Callable

import pytest
from click.testing import CliRunner, Result
from confluent_kafka import KafkaException, Producer

from integration_tests.conftest import TransactionalProducer
from kafka_eos.cluster import KafkaCluster
from kafka_eos.commands.verify import command

pytestmark = pytest.mark.kafka

KEYS = [f"order-{i}" for i in range(5)]


def produce(bootstrap_servers: str, topic: str, keys: list[str]) -> None:
    """Committed records, one per key, across the topic's partitions."""
    producer = Producer({"bootstrap.servers": bootstrap_servers})
    for key in keys:
        producer.produce(topic, key=key.encode(), value=b"result")
    assert producer.flush(30) == 0


def aborted_transaction(bootstrap_servers: str, topic: str, keys: list[str]) -> None:
    """Records a read_committed reader must never count."""
    producer = Producer(
        {"bootstrap.servers": bootstrap_servers, "transactional.id": f"it-{uuid.uuid4().hex}"}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for key in keys:
        producer.produce(topic, key=key.encode(), value=b"aborted")
    producer.flush(30)
    producer.abort_transaction(30)


def verify(bootstrap_servers: str, input_topic: str, output_topic: str, *args: str) -> Result:
    return CliRunner().invoke(
        command,
        [
            "--bootstrap-servers",
            bootstrap_servers,
            "--input",
            input_topic,
            "--output",
            output_topic,
            "--timeout",
            "30",
            "--json",
            *args,
        ],
        catch_exceptions=False,
    )


@pytest.fixture
def input_topic(kafka: KafkaCluster, topic_factory: Callable[..., str]) -> str:
    topic = topic_factory(partitions=2)
    produce(kafka.bootstrap_servers, topic, KEYS)
    return topic


def test_exactly_once_output_exits_zero(
    kafka: KafkaCluster, topic_factory: Callable[..., str], input_topic: str
) -> None:
    output = topic_factory(partitions=3)
    produce(kafka.bootstrap_servers, output, KEYS)
    aborted_transaction(kafka.bootstrap_servers, output, KEYS[:2])  # a replay that was undone
    result = verify(kafka.bootstrap_servers, input_topic, output)
    report = json.loads(result.stdout)
    assert (report["inputs"], report["outputs"], report["exactly_once"]) == (5, 5, True)
    assert result.exit_code == 0


def test_a_duplicated_result_exits_one(
    kafka: KafkaCluster, topic_factory: Callable[..., str], input_topic: str
) -> None:
    output = topic_factory()
    produce(kafka.bootstrap_servers, output, [*KEYS, "order-2"])
    result = verify(kafka.bootstrap_servers, input_topic, output)
    report = json.loads(result.stdout)
    assert report["outputs"] == 6
    assert report["duplicated"]["examples"] == [{"key": "order-2", "expected": 1, "seen": 2}]
    assert report["missing"]["keys"] == report["unexpected"]["keys"] == 0
    assert result.exit_code == 1


def test_a_lost_result_exits_one(
    kafka: KafkaCluster, topic_factory: Callable[..., str], input_topic: str
) -> None:
    output = topic_factory()
    produce(kafka.bootstrap_servers, output, KEYS[:-1])
    result = verify(kafka.bootstrap_servers, input_topic, output)
    report = json.loads(result.stdout)
    assert report["missing"] == {
        "keys": 1,
        "records": 1,
        "examples": [{"key": "order-4", "expected": 1, "seen": 0}],
    }
    assert result.exit_code == 1


def test_an_open_transaction_of_the_prefix_means_not_final(
    kafka: KafkaCluster, topic_factory: Callable[..., str], input_topic: str
) -> None:
    bootstrap = kafka.bootstrap_servers
    output = topic_factory()
    produce(bootstrap, output, KEYS[:-1])
    prefix = f"verify-{uuid.uuid4().hex[:10]}"
    pending = TransactionalProducer(bootstrap, f"{prefix}-0")
    pending.init_transactions(30)
    pending.begin_transaction()
    pending.produce(output, key=b"order-4", value=b"result")
    pending.flush(30)
    try:
        result = verify(bootstrap, input_topic, output, "--prefix", prefix)
        report = json.loads(result.stdout)
        assert report["open_transactions"] == [f"{prefix}-0"]
        assert report["final"] is False and report["missing"]["keys"] == 1
        assert result.exit_code == 1
        pending.commit_transaction(30)
        result = verify(bootstrap, input_topic, output, "--prefix", prefix)
        assert json.loads(result.stdout)["passed"] is True
        assert result.exit_code == 0
    finally:
        with contextlib.suppress(KafkaException):
            pending.abort_transaction(10)


def test_a_missing_topic_exits_two(kafka: KafkaCluster, input_topic: str) -> None:
    result = verify(kafka.bootstrap_servers, input_topic, f"absent-{uuid.uuid4().hex[:8]}")
    assert result.exit_code == 2 and result.stderr == ""  # under --json, the error is JSON too
    error = json.loads(result.stdout)["error"]
    assert error["code"] == "KAFKA_EOS.OPERATIONS.VERIFY_READ_FAILED"
    assert error["message"].startswith("--output 'absent-") and "topic exists" in error["message"]
