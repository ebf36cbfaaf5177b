"""EOS018: Java-client keys in a kafka-eos sink or source section, read from a pipeline file
as the connectors read them (connectors/kafka_keys.py)."""

import pytest
from click.testing import Result

from connectors.policy import run_rules
from kafka_eos.lint.loaders import pipeline_input

PLAIN = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="alice" password="wonderland";'
)


def findings(document):
    return run_rules(pipeline_input(document), select=["EOS018"])


def test_each_translated_key_gets_a_warning_saying_what_it_becomes():
    found = findings(
        {
            "sink": {
                "topic": "out",
                "kafka.max.request.size": "2097152",
                "kafka.buffer.memory": "33554432",
            }
        }
    )
    assert [(f.severity, f.keys) for f in found] == [
        ("warning", ("kafka.buffer.memory",)),
        ("warning", ("kafka.max.request.size",)),
    ]
    assert "runs it as librdkafka's queue.buffering.max.kbytes=32768" in found[0].message
    assert found[1].fix.startswith("write kafka.message.max.bytes instead")


def test_the_rules_see_the_librdkafka_key_it_becomes():
    lint_input = pipeline_input({"sink": {"topic": "out", "kafka.max.request.size": "2097152"}})
    assert lint_input.producer["message.max.bytes"] == "2097152"
    assert "max.request.size" not in lint_input.producer


def test_each_refused_key_gets_an_error_naming_the_key_to_use():
    [finding] = findings(
        {"source": {"subscribe": "orders", "kafka.ssl.truststore.location": "/etc/ts.jks"}}
    )
    assert finding.severity == "error"
    assert "source option kafka.ssl.truststore.location=/etc/ts.jks" in finding.message
    assert "kafka.ssl.ca.location" in finding.fix


@pytest.mark.parametrize("section", ["sink", "source"])
def test_a_jaas_entry_is_translated_without_showing_the_password(section):
    options = {"kafka.sasl.mechanism": "PLAIN", "kafka.sasl.jaas.config": PLAIN}
    [finding] = findings({section: {"topic": "t", "subscribe": "t", **options}})
    assert finding.severity == "warning"
    assert "wonderland" not in finding.message + finding.fix + str(finding.values)
    assert "sasl.username=alice, sasl.password=***" in finding.message


def test_librdkafka_keys_and_plain_sections_do_not_fire():
    assert findings({"sink": {"topic": "out", "kafka.message.max.bytes": "2097152"}}) == []
    assert findings({"producer": {"max.request.size": "2097152"}}) == []


def test_the_cli_fails_on_a_refused_key(cli, tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("sink: {topic: out, kafka.max.block.ms: 60000}\n")
    result: Result = cli("--config", str(path), "--select", "EOS018")
    assert result.exit_code == 1
    assert "flushTimeoutMs" in result.output
