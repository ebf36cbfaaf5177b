"""EOS007: enable.idempotence, acks=all, retries >= 1, in-flight <= 5."""

import pytest


@pytest.mark.parametrize("client", ["java", "librdkafka"])
def test_defaults_of_a_transactional_producer_pass(lint, client):
    assert lint("EOS007", client=client, producer={"transactional.id": "orders-v1"}) == []


def test_explicitly_acks_all_as_minus_one_passes(lint):
    assert lint("EOS007", producer={"acks": "-1", "max.in.flight": "5", "retries": "3"}) == []


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("enable.idempotence", "false"),
        ("acks", "1"),
        ("request.required.acks", "0"),
        ("retries", "0"),
        ("message.send.max.retries", "0"),
        ("max.in.flight", "10"),
        ("max.in.flight.requests.per.connection", "6"),
    ],
)
def test_each_broken_member_fires(lint, key, value):
    [finding] = lint("EOS007", producer={key: value})
    assert finding.severity == "error"
    assert f"{key}={value}" in finding.message
    assert key in finding.fix


def test_every_broken_member_is_reported(lint):
    producer = {"enable.idempotence": "false", "acks": "1", "retries": "0", "max.in.flight": "10"}
    assert len(lint("EOS007", producer=producer)) == 4
