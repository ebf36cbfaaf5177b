"""EOS003: a very large transaction timeout stalls read_committed readers."""


def test_one_hour_is_a_warning(lint):
    [finding] = lint("EOS003", producer={"transaction.timeout.ms": "3600000"})
    assert finding.severity == "warning"
    assert "last stable offset" in finding.message
    assert "1h" in finding.message


def test_fifteen_minutes_passes(lint):
    assert lint("EOS003", producer={"transaction.timeout.ms": "900000"}) == []


def test_threshold_option(lint):
    producer = {"transaction.timeout.ms": "900000"}
    assert lint("EOS003", producer=producer, rule_options={"EOS003": {"max_timeout_ms": 600000}})


def test_no_producer_does_not_fire(lint):
    assert lint("EOS003") == []
