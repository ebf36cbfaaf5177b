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


def test_java_ignores_message_timeout_so_it_is_no_false_error(lint):
    # Java reads delivery.timeout.ms=60000; message.timeout.ms is librdkafka's key.
    producer = {"message.timeout.ms": "300000", "delivery.timeout.ms": "60000"}
    assert lint("EOS004", client="java", producer=producer) == []
    [finding] = lint("EOS004", producer=producer)  # librdkafka reads whichever it sees first
    assert "message.timeout.ms=300000" in finding.message


def test_java_librdkafka_spelling_alone_leaves_the_default_and_says_it_is_ignored(lint):
    [finding] = lint("EOS004", client="java", producer={"message.timeout.ms": "60000"})
    assert "delivery.timeout.ms=120000 (java default; message.timeout.ms is" in finding.message


def test_java_fix_stays_above_linger_plus_request(lint):
    [finding] = lint("EOS004", client="java", producer={})
    assert "at most 60000 and at least linger.ms + request.timeout.ms = 30005" in finding.fix


def test_java_fix_says_when_no_delivery_timeout_fits(lint):
    # delivery.timeout.ms <= 800000 would break Java's delivery >= linger + request check.
    producer = {"transaction.timeout.ms": "800000", "linger.ms": "1000000"}
    [finding] = lint("EOS004", client="java", producer=producer)
    assert finding.fix.startswith("no delivery.timeout.ms satisfies both this rule and EOS006")
    assert "1000000 + 30000 = 1030000" in finding.fix
    assert "lower linger.ms" in finding.fix
    assert "raise transaction.timeout.ms to at least 1030000" in finding.fix
    # What the fix used to suggest: Java rejects it at startup.
    assert lint("EOS006", client="java", producer={**producer, "delivery.timeout.ms": "800000"})


def test_librdkafka_fix_says_when_no_message_timeout_fits(lint):
    producer = {"transaction.timeout.ms": "60000", "linger.ms": "60000", "message.timeout.ms": "0"}
    [finding] = lint("EOS004", producer=producer)
    assert finding.fix.startswith("no message.timeout.ms satisfies both")
    assert "lower linger.ms well below 60000" in finding.fix
