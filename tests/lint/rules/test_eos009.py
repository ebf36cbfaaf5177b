"""EOS009: transactional.id.expiration.ms shorter than the max checkpoint age."""

from connectors.policy import Timing


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


def test_idle_time_longer_than_expiration_fires(lint):
    timing = Timing(max_idle_time_ms=14 * 86_400_000)
    [finding] = lint("EOS009", broker={}, timing=timing)
    assert "transactional.id.expiration.ms=604800000 (7d, Apache Kafka default)" in finding.message
    assert "max idle time 14d" in finding.message and "= 14d" in finding.message
    assert finding.values["max_idle_time_ms"] == str(14 * 86_400_000)
    assert "at least 1209600000" in finding.fix


def test_the_larger_of_idle_time_and_checkpoint_age_counts(lint):
    broker = {"transactional.id.expiration.ms": str(3 * 86_400_000)}
    assert lint("EOS009", broker=broker, timing=Timing(max_idle_time_ms=2 * 86_400_000)) == []
    [finding] = lint(
        "EOS009",
        broker=broker,
        timing=Timing(max_idle_time_ms=86_400_000, max_checkpoint_age_ms=4 * 86_400_000),
    )
    assert "= 4d" in finding.message
