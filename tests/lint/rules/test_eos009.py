"""EOS009: transactional.id.expiration.ms shorter than the max checkpoint age."""

from connectors.lint import Timing


def test_default_broker_and_timing_pass(lint):
    assert lint("EOS009", broker={}) == []


def test_expiration_shorter_than_checkpoint_age_fires(lint):
    broker = {"transactional.id.expiration.ms": "86400000"}
    [finding] = lint("EOS009", broker=broker, timing=Timing(max_checkpoint_age_ms=604_800_000))
    assert finding.severity == "error"
    assert "transactional.id.expiration.ms=86400000 (1d)" in finding.message
    assert "7d" in finding.message
    assert finding.values["max_checkpoint_age_ms"] == "604800000"


def test_unknown_broker_does_not_fire(lint):
    assert lint("EOS009", timing=Timing(max_checkpoint_age_ms=10**12)) == []
