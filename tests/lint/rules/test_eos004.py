"""EOS004: message.timeout.ms / delivery.timeout.ms above transaction.timeout.ms."""

import pytest


@pytest.mark.parametrize("key", ["message.timeout.ms", "delivery.timeout.ms"])
def test_librdkafka_explicit_timeout_above_transaction_timeout(lint, key):
    [finding] = lint("EOS004", producer={"transaction.timeout.ms": "60000", key: "300000"})
    assert finding.severity == "error"
    assert f"{key}=300000" in finding.message
    assert "refuses to create the producer" in finding.message


def test_librdkafka_unset_timeout_follows_the_transaction_timeout(lint):
    assert lint("EOS004", producer={"transaction.timeout.ms": "60000"}) == []


def test_zero_means_no_limit_and_fires(lint):
    [finding] = lint("EOS004", producer={"message.timeout.ms": "0"})
    assert "no limit" in finding.message


def test_java_defaults_fire(lint):
    [finding] = lint("EOS004", client="java", producer={})
    assert "delivery.timeout.ms=120000 (java default)" in finding.message
    assert "fencing" in finding.message


def test_java_delivery_timeout_within_the_transaction_passes(lint):
    producer = {"delivery.timeout.ms": "60000"}
    assert lint("EOS004", client="java", producer=producer) == []
