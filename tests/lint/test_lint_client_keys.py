"""Key spellings and defaults of the Java client and librdkafka."""

import pytest

from connectors.policy.client_keys import (
    canonical,
    client_default,
    find_key,
    ignored_key,
    merge_configs,
    native_name,
)


@pytest.mark.parametrize(
    ("librdkafka", "java"),
    [
        ("message.timeout.ms", "delivery.timeout.ms"),
        ("message.send.max.retries", "retries"),
        ("max.in.flight", "max.in.flight.requests.per.connection"),
        ("queue.buffering.max.ms", "linger.ms"),
        ("request.required.acks", "acks"),
    ],
)
def test_aliases(librdkafka, java):
    assert canonical(librdkafka) == java
    assert canonical(java) == java
    assert native_name(java, "librdkafka") == librdkafka
    assert native_name(java, "java") == java


def test_isolation_level_defaults_differ():
    assert client_default("consumer", "isolation.level", "java") == "read_uncommitted"
    assert client_default("consumer", "isolation.level", "librdkafka") == "read_committed"


def test_java_has_no_socket_timeout():
    assert client_default("producer", "socket.timeout.ms", "java") is None
    assert client_default("producer", "socket.timeout.ms", "librdkafka") == "60000"


def test_find_key_returns_the_spelling_used():
    assert find_key({"message.timeout.ms": "1"}, "delivery.timeout.ms") == "message.timeout.ms"
    assert find_key({}, "delivery.timeout.ms") is None


def test_merge_replaces_the_other_spelling():
    merged = merge_configs({"delivery.timeout.ms": "1", "acks": "all"}, {"message.timeout.ms": "2"})
    assert merged == {"acks": "all", "message.timeout.ms": "2"}


def test_merge_keeps_absent_as_none():
    assert merge_configs(None, None) is None
    assert merge_configs(None, {}) == {}


@pytest.mark.parametrize(
    "librdkafka",
    ["message.timeout.ms", "message.send.max.retries", "max.in.flight", "queue.buffering.max.ms"],
)
def test_java_does_not_read_librdkafka_spellings(librdkafka):
    assert canonical(librdkafka, "java") == librdkafka
    java = canonical(librdkafka, "librdkafka")
    assert find_key({librdkafka: "1"}, java, "java") is None
    assert find_key({librdkafka: "1"}, java, "librdkafka") == librdkafka
    assert ignored_key({librdkafka: "1", java: "2"}, java, "java") == librdkafka
    assert ignored_key({librdkafka: "1"}, java, "librdkafka") is None
