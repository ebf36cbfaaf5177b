"""EOS001: transaction.timeout.ms above the broker's transaction.max.timeout.ms."""

import pytest

FLINK_DEFAULT = {"transaction.timeout.ms": "3600000"}


def test_flink_default_against_default_broker_is_an_error(lint):
    [finding] = lint("EOS001", producer=FLINK_DEFAULT, broker={})
    assert finding.severity == "error"
    for text in ("transaction.timeout.ms", "transaction.max.timeout.ms", "3600000", "900000"):
        assert text in finding.message
    assert finding.values == {
        "transaction.timeout.ms": "3600000",
        "transaction.max.timeout.ms": "900000",
    }
    assert "Apache Kafka default" in finding.message
    assert "at most 900000" in finding.fix


@pytest.mark.parametrize("client", ["java", "librdkafka"])
def test_timeout_at_the_limit_passes(lint, client):
    assert (
        lint("EOS001", client=client, producer={"transaction.timeout.ms": "900000"}, broker={})
        == []
    )


def test_raised_broker_limit_passes(lint):
    broker = {"transaction.max.timeout.ms": "3600000"}
    assert lint("EOS001", producer=FLINK_DEFAULT, broker=broker) == []


def test_lowered_broker_limit_catches_the_client_default(lint):
    [finding] = lint("EOS001", producer={}, broker={"transaction.max.timeout.ms": "30000"})
    assert "librdkafka default" in finding.message


def test_unknown_broker_or_producer_does_not_fire(lint):
    assert lint("EOS001", producer=FLINK_DEFAULT, broker=None) == []
    assert lint("EOS001", producer=None, broker={}) == []
