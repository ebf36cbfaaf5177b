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
