"""EOS002: transaction timeout not comfortably above trigger + batch + restart."""

from connectors.policy import Timing


def test_client_default_is_too_short_for_default_timing(lint):
    [finding] = lint("EOS002", producer={})
    assert finding.severity == "error"
    # 2 x (10s + 1m + 5m) = 12m20s
    assert "12m20s" in finding.message
    assert "at least 740000" in finding.fix
    assert finding.values["max_restart_time_ms"] == "300000"


def test_the_message_says_what_happens_to_the_batch(lint):
    """The loss is reported, never silent (README): the message says how, and what to run."""
    [finding] = lint("EOS002", producer={})
    assert "silent" not in finding.message
    assert "lost to read_committed readers" in finding.message
    assert "KAFKA_EOS.SINK.TRANSACTION_LOST" in finding.message
    assert "kafka-eos txn resolve" in finding.message


def test_fifteen_minutes_covers_default_timing(lint):
    assert lint("EOS002", producer={"transaction.timeout.ms": "900000"}) == []


def test_exactly_the_required_timeout_passes(lint):
    timing = Timing(trigger_interval_ms=0, max_batch_duration_ms=10_000, max_restart_time_ms=20_000)
    assert lint("EOS002", producer={"transaction.timeout.ms": "60000"}, timing=timing) == []


def test_safety_factor_option(lint):
    producer = {"transaction.timeout.ms": "900000"}
    [finding] = lint("EOS002", producer=producer, rule_options={"EOS002": {"safety_factor": 3}})
    assert "3 x" in finding.message


def test_fix_mentions_the_broker_limit_when_it_is_too_low(lint):
    timing = Timing(max_batch_duration_ms=600_000)
    [finding] = lint(
        "EOS002", producer={"transaction.timeout.ms": "900000"}, broker={}, timing=timing
    )
    assert "transaction.max.timeout.ms" in finding.fix


def test_no_producer_does_not_fire(lint):
    assert lint("EOS002") == []
