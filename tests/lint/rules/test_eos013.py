"""EOS013: source consumer auto-commits offsets."""

import pytest


@pytest.mark.parametrize("client", ["java", "librdkafka"])
def test_default_auto_commit_fires(lint, client):
    [finding] = lint("EOS013", client=client, consumer={"group.id": "g"})
    assert finding.severity == "warning"
    assert f"enable.auto.commit=true ({client} default)" in finding.message


def test_disabled_auto_commit_passes(lint):
    assert lint("EOS013", consumer={"enable.auto.commit": "false"}) == []


def test_no_source_consumer_does_not_fire(lint):
    assert lint("EOS013") == []


def test_kafka_eos_source_forces_auto_commit_off(lint):
    # A pipeline file's source section: the source never auto-commits, whatever the default.
    assert lint("EOS013", consumer={}, kafka_eos_source=True) == []


def test_kafka_eos_source_option_it_refuses_is_reported_with_removal_as_the_fix(
    refused_source_option,
):
    refused_source_option("EOS013", "enable.auto.commit", "false")
