"""EOS006: linger vs message timeout, and Java delivery >= linger + request timeout."""

import pytest


@pytest.mark.parametrize("key", ["linger.ms", "queue.buffering.max.ms"])
def test_librdkafka_linger_not_below_message_timeout(lint, key):
    [finding] = lint("EOS006", producer={"transaction.timeout.ms": "60000", key: "60000"})
    assert finding.severity == "error"
    assert f"{key}=60000" in finding.message
    assert "must be greater than `linger.ms`" in finding.message


def test_librdkafka_small_or_unset_linger_passes(lint):
    assert lint("EOS006", producer={"linger.ms": "5"}) == []
    assert lint("EOS006", producer={}) == []


def test_java_explicit_delivery_timeout_below_linger_plus_request(lint):
    producer = {"delivery.timeout.ms": "20000", "linger.ms": "5"}
    [finding] = lint("EOS006", client="java", producer=producer)
    assert "ConfigException" in finding.message
    assert "30005" in finding.message and "at least 30005" in finding.fix


def test_java_sufficient_or_unset_delivery_timeout_passes(lint):
    assert lint("EOS006", client="java", producer={"delivery.timeout.ms": "60000"}) == []
    assert lint("EOS006", client="java", producer={"linger.ms": "200000"}) == []
