"""The Kafka sink's startup check: same rules and messages as the CLI."""

import doctest
import pickle

import pytest

import connectors.policy.sink_checks
from checkpoint.errors import ConfigError, KafkaEosError
from connectors.policy import (
    Finding,
    LintError,
    LintInput,
    SinkConfigError,
    Timing,
    check_sink_config,
    raise_for_errors,
    run_rules,
)
from kafka_eos.lint.loaders import pipeline_input

GOOD = {"transactional.id": "orders-v1-0", "transaction.timeout.ms": 900000, "error_cb": print}


def test_good_config_has_no_findings():
    assert check_sink_config(GOOD, {"transaction.max.timeout.ms": "900000"}, Timing()) == []


def test_runs_exactly_the_three_timeout_rules():
    producer = {"transaction.timeout.ms": 3600000, "message.timeout.ms": 7200000, "acks": 1}
    findings = check_sink_config(producer, {}, Timing(max_batch_duration_ms=3_600_000))
    assert sorted(f.rule for f in findings) == ["EOS001", "EOS002", "EOS004"]


def test_unknown_broker_skips_the_broker_rule():
    assert check_sink_config({"transaction.timeout.ms": 3600000}, None, Timing()) == []


def test_same_messages_as_the_cli():
    producer = {"transaction.timeout.ms": "3600000"}
    cli = run_rules(LintInput(producer=producer, broker={}), select=["EOS001"])
    assert check_sink_config(producer, {}, Timing()) == cli


def test_java_client_defaults():
    quick = Timing(trigger_interval_ms=0, max_batch_duration_ms=10_000, max_restart_time_ms=20_000)
    producer = {"transaction.timeout.ms": 100000}
    [finding] = check_sink_config(producer, None, quick, client="java")
    assert finding.rule == "EOS004"
    assert "delivery.timeout.ms=120000 (java default)" in finding.message


def test_raise_for_errors_lists_each_error_and_fix():
    findings = check_sink_config({"transaction.timeout.ms": 3600000}, {}, Timing())
    with pytest.raises(SinkConfigError) as caught:
        raise_for_errors(findings)
    assert isinstance(caught.value, LintError)
    assert caught.value.findings == tuple(findings)
    message = str(caught.value)
    assert "EOS001: producer transaction.timeout.ms=3600000" in message
    assert "fix: set transaction.timeout.ms to at most 900000" in message


def test_raise_for_errors_without_errors_is_silent():
    raise_for_errors([])
    raise_for_errors([Finding("EOS003", "warning", "m", ("k",), {}, "f")])


def test_error_is_a_picklable_project_config_error():
    findings = check_sink_config({"transaction.timeout.ms": 3600000}, {}, Timing())
    error = SinkConfigError(findings)
    assert isinstance(error, ConfigError) and isinstance(error, KafkaEosError)
    copy = pickle.loads(pickle.dumps(error))
    assert str(copy) == str(error) and copy.findings == error.findings


def test_docstring_example():
    assert doctest.testmod(connectors.policy.sink_checks).failed == 0


def test_a_pipeline_files_sink_section_is_linted_as_the_sink_runs():
    """``kafka-eos lint`` of a drop-in's sink section: no prefix, no timeout, no finding."""
    document = {"sink": {"kafka.bootstrap.servers": "k:9092", "checkpointLocation": "/c/q"}}
    findings = run_rules(pipeline_input(document), select=["EOS001", "EOS002", "EOS008"])
    assert findings == []
    bare_producer = LintInput(producer={}, broker={})  # not the sink: librdkafka's defaults
    rules = {f.rule for f in run_rules(bare_producer, select=["EOS002", "EOS008"])}
    assert rules == {"EOS002", "EOS008"}
