"""Resolved values: set, derived by the client, or the client's default."""

import pytest

from connectors.policy import LintInputError
from connectors.policy.context import BrokerView, ClientView, Setting


def producer(client="librdkafka", **config):
    return ClientView(
        "producer", "producer", client, {k.replace("_", "."): v for k, v in config.items()}
    )


def test_explicit_value_keeps_the_written_spelling():
    setting = producer(**{"message_timeout_ms": "1000"}).get("delivery.timeout.ms")
    assert str(setting) == "producer message.timeout.ms=1000"


def test_librdkafka_transactional_derivations():
    view = producer(transaction_timeout_ms="90000")
    assert view.get("delivery.timeout.ms").value == "90000"
    assert view.get("socket.timeout.ms").value == "89900"
    assert view.get("enable.idempotence").value == "true"
    assert view.get("max.in.flight.requests.per.connection").value == "5"
    assert view.get("delivery.timeout.ms").key == "message.timeout.ms"


def test_librdkafka_socket_timeout_floor():
    assert producer(transaction_timeout_ms="1000").get("socket.timeout.ms").value == "900"


def test_java_raises_delivery_timeout_to_linger_plus_request():
    view = producer("java", linger_ms="100000", request_timeout_ms="30000")
    setting = view.get("delivery.timeout.ms")
    assert setting.value == "130000"
    assert "linger.ms + request.timeout.ms" in setting.note
    assert producer("java").get("delivery.timeout.ms").note == "java default"


def test_consumer_defaults_are_not_derived():
    view = ClientView("consumer", "source consumer", "java", {})
    assert (
        str(view.get("isolation.level"))
        == "source consumer isolation.level=read_uncommitted (java default)"
    )


def test_unknown_default_is_a_programming_error():
    with pytest.raises(KeyError):
        producer("java").get("socket.timeout.ms")


def test_non_numeric_value_is_an_input_error():
    with pytest.raises(
        LintInputError, match=r"producer transaction\.timeout\.ms=soon is not a number"
    ):
        producer(transaction_timeout_ms="soon").get("transaction.timeout.ms").ms()


def test_timed_rendering():
    assert Setting("broker", "k", "900000", "Apache Kafka default").timed() == (
        "broker k=900000 (15m, Apache Kafka default)"
    )


@pytest.mark.parametrize(
    ("config", "value", "note"),
    [
        ({}, "604800000", "Apache Kafka default, log.retention.hours=168"),
        ({"log.retention.hours": "24"}, "86400000", "log.retention.hours=24"),
        (
            {"log.retention.minutes": "60", "log.retention.hours": "24"},
            "3600000",
            "log.retention.minutes=60",
        ),
        ({"log.retention.ms": "5000", "log.retention.minutes": "60"}, "5000", ""),
    ],
)
def test_broker_retention_precedence(config, value, note):
    setting = BrokerView(config).retention_ms()
    assert (setting.value, setting.note) == (value, note)


def test_java_ignores_a_librdkafka_spelling_and_says_so():
    view = producer("java", message_timeout_ms="60000", transaction_timeout_ms="60000")
    setting = view.get("delivery.timeout.ms")
    assert (setting.key, setting.value) == ("delivery.timeout.ms", "120000")
    assert setting.note == (
        "java default; message.timeout.ms is librdkafka's name, which java ignores"
    )
    assert view.explicit("delivery.timeout.ms") is None
