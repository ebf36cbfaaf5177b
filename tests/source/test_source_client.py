"""Which ``kafka.*`` options reach librdkafka, and the consumer the source configures."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from connectors.kafka.source.client import consumer_config, is_transient
from connectors.kafka.source.errors import SourceOptionError
from connectors.kafka.source.options import SourceOptions

BASE = {"kafka.bootstrap.servers": "k:9092", "subscribe": "orders"}


def parse(**extra: str) -> object:
    return SourceOptions.parse({**BASE, **extra}, streaming=True)


def error_of(**extra: str) -> str:
    with pytest.raises(SourceOptionError) as caught:
        parse(**extra)
    return str(caught.value)


@pytest.mark.parametrize(
    ("key", "fix"),
    [
        ("kafka.auto.offset.reset", "startingOffsets"),
        ("kafka.enable.auto.commit", "kafka.group.id"),
        ("kafka.key.deserializer", "CAST(key AS STRING)"),
        ("kafka.value.deserializer", "CAST(value AS STRING)"),
        ("kafka.interceptor.classes", "remove the option"),
        ("kafka.ssl.truststore.location", "kafka.ssl.ca.location"),
        ("kafka.max.poll.records", "maxOffsetsPerTrigger"),
    ],
)
def test_rejected_kafka_keys_name_key_value_and_fix(key: str, fix: str) -> None:
    message = error_of(**{key: "some-value"})
    assert f"{key}='some-value'" in message
    assert fix in message


def test_group_id_is_allowed() -> None:
    assert parse(**{"kafka.group.id": "lag-monitor"}).group_id == "lag-monitor"


def test_kafka_keys_pass_to_librdkafka_without_prefix() -> None:
    opts = parse(
        **{
            "kafka.security.protocol": "SASL_SSL",
            "kafka.isolation.level": "read_uncommitted",
            "kafka.default.api.timeout.ms": "5000",
            "kafka.group.id": "g",
        }
    )
    # The keys the source reads itself are not passed on twice.
    assert opts.client_config == {"security.protocol": "SASL_SSL"}
    assert opts.api_timeout_s == 5.0
    config = consumer_config(opts, "g-executor")
    assert config["isolation.level"] == "read_uncommitted"
    assert config["group.id"] == "g-executor"
    assert config["enable.auto.commit"] == "false"
    assert config["auto.offset.reset"] == "error"


def test_a_jaas_entry_it_cannot_translate_is_refused_without_echoing_it() -> None:
    message = error_of(**{"kafka.sasl.jaas.config": "com.sun.Krb5LoginModule required;"})
    assert "kafka.sasl.jaas.config='***'" in message
    assert "kafka.sasl.kerberos" in message and "Krb5" not in message


def test_java_keys_with_a_librdkafka_name_are_translated() -> None:
    opts = parse(**{"kafka.fetch.max.wait.ms": "100", "kafka.receive.buffer.bytes": "65536"})
    assert opts.client_config == {
        "fetch.wait.max.ms": "100",
        "socket.receive.buffer.bytes": "65536",
    }


def test_keys_librdkafka_rejects_fail_at_parsing_naming_librdkafka() -> None:
    """Checked when the options are parsed (on the driver, at query start): no broker needed."""
    message = error_of(**{"kafka.no.such.setting": "1"})
    assert "kafka.no.such.setting='1'" in message
    assert "librdkafka has no property 'no.such.setting'" in message


def test_transient_errors() -> None:
    assert is_transient(KafkaError(KafkaError._TRANSPORT))
    assert is_transient(KafkaError(KafkaError.LEADER_NOT_AVAILABLE))
    # A leader elected a moment ago (seen after a broker was killed in a 3-node cluster).
    assert is_transient(KafkaError(KafkaError.OFFSET_NOT_AVAILABLE))
    assert not is_transient(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))
    # Gone or not known yet: the caller decides (range_reader confirms, then data loss).
    assert not is_transient(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))
    assert not is_transient(KafkaError(KafkaError._TRANSPORT, fatal=True))
