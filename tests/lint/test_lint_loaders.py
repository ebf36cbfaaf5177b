"""Reading .properties and pipeline files."""

import json

import pytest

from connectors.policy import LintInputError, Timing
from kafka_eos.lint.loaders import (
    load_pipeline,
    load_properties,
    parse_kafka_options,
    parse_properties,
)


def test_properties_syntax():
    text = "\n".join(
        [
            "# comment",
            "! also a comment",
            "transaction.timeout.ms=900000",
            "  acks : all",
            "linger.ms 5",
            "transactional.id=orders\\",
            r"   -v1",
            r"path=C:\\kafka\tdir",
            r"unicode=caf\u00e9",
            r"key\=with\:sep=x",
            "empty=",
            "acks=1",
        ]
    )
    assert parse_properties(text) == {
        "transaction.timeout.ms": "900000",
        "acks": "1",
        "linger.ms": "5",
        "transactional.id": "orders-v1",
        "path": "C:\\kafka\tdir",
        "unicode": "café",
        "key=with:sep": "x",
        "empty": "",
    }


def test_properties_entry_without_key():
    with pytest.raises(LintInputError, match=r"p.properties:2: entry has no key"):
        parse_properties("a=1\n=2", source="p.properties")


def test_missing_file_is_an_input_error(tmp_path):
    with pytest.raises(LintInputError, match="cannot read"):
        load_properties(tmp_path / "nope.properties")


def test_kafka_options():
    assert parse_kafka_options(["kafka.security.protocol=SSL", "sasl.password=a=b"]) == {
        "security.protocol": "SSL",
        "sasl.password": "a=b",
    }
    with pytest.raises(LintInputError, match="#1: expected KEY=VALUE"):
        parse_kafka_options(["sasl.password:hunter2"])


PIPELINE = """
client: java
producer: {linger.ms: 5, enable.idempotence: true}
consumer: {group.id: orders}
sink:
  kafka.transaction.timeout.ms: 900000
  kafka.message.timeout.ms: 60000
  transactionalIdPrefix: orders-v1
  topic: out
source: {kafka.isolation.level: read_committed, subscribe: orders}
downstream_consumers:
  - {name: billing, client: librdkafka, config: {isolation.level: read_committed}}
  - config: {}
broker: {transaction.max.timeout.ms: 900000}
output_topics: [audit]
source_topics: [refunds]
timing:
  trigger_interval: 5s
  max_batch_duration: 2m
  max_restart_time: 600000
  max_checkpoint_age: 7d
cluster:
  broker_count: 3
  topics:
    out: {replication_factor: 3, config: {min.insync.replicas: 2}}
rule_options: {EOS002: {safety_factor: 3}}
"""


def test_pipeline_yaml(write):
    lint_input = load_pipeline(write("pipeline.yaml", PIPELINE))
    assert lint_input.client == "java"
    assert lint_input.producer == {
        "linger.ms": "5",
        "enable.idempotence": "true",
        "transaction.timeout.ms": "900000",
        "message.timeout.ms": "60000",
    }
    assert lint_input.consumer == {"group.id": "orders", "isolation.level": "read_committed"}
    assert lint_input.sink_options == {"transactionalIdPrefix": "orders-v1", "topic": "out"}
    assert lint_input.source_options == {"subscribe": "orders"}
    assert [(c.name, c.client) for c in lint_input.downstream_consumers] == [
        ("billing", "librdkafka"),
        ("#2", None),
    ]
    assert lint_input.broker == {"transaction.max.timeout.ms": "900000"}
    assert lint_input.output_topic_names() == ("audit", "out")
    assert lint_input.source_topic_names() == ("refunds", "orders")
    assert lint_input.timing == Timing(5_000, 120_000, 600_000, 604_800_000)
    assert lint_input.cluster.broker_count == 3
    assert lint_input.cluster.topics["out"].config == {"min.insync.replicas": "2"}
    assert lint_input.rule_options == {"EOS002": {"safety_factor": 3.0}}


def test_spark_kafka_prefix_is_case_insensitive(write):
    lint_input = load_pipeline(
        write("p.yaml", "sink: {Kafka.Transaction.Timeout.MS: 1000, Topic: out}")
    )
    assert lint_input.producer == {"transaction.timeout.ms": "1000"}
    assert lint_input.output_topic_names() == ("out",)


def test_pipeline_json_and_empty_sections(write):
    lint_input = load_pipeline(write("p.json", json.dumps({"sink": {"topic": "out"}})))
    assert lint_input.producer == {}, "a sink section means a producer on defaults"
    assert lint_input.consumer is None and lint_input.broker is None
    assert load_pipeline(write("empty.yaml", "")).producer is None


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("producers: {}", "unknown section"),
        ("- a", "not a pipeline file: its top level is a list"),
        ("producer: {acks: [1, 2]}", r"producer\.acks: expected a single value"),
        ("client: go", "client='go'"),
        ("timing: {max_batch: 1m}", "timing: unknown max_batch"),
        ("timing: {max_batch_duration: soon}", "timing.max_batch_duration"),
        ("cluster: {broker_count: 0}", "broker_count: expected a positive integer"),
        ("downstream_consumers: [{name: x}]", r"downstream_consumers\[0\]"),
        ("rule_options: {EOS002: {safety_factor: high}}", "expected a number"),
        ("producer: {a: 1", "not valid YAML"),
    ],
)
def test_pipeline_errors(write, text, error):
    with pytest.raises(LintInputError, match=error):
        load_pipeline(write("bad.yaml", text))


def test_a_python_job_is_refused_by_name(write):
    """Read as YAML, a job's first line is a string: the message says what --config takes."""
    with pytest.raises(LintInputError) as caught:
        load_pipeline(write("job.py", "from pyspark.sql import SparkSession\n"))
    message = str(caught.value)
    assert "job.py: a Python file is not read" in message
    assert "YAML or JSON" in message and "sink: and source: sections" in message


def test_a_text_file_is_not_a_pipeline_file(write):
    with pytest.raises(LintInputError, match=r"notes\.txt: not a pipeline file: .* a str, where"):
        load_pipeline(write("notes.txt", "just some text\n"))


def test_invalid_json_names_the_line(write):
    with pytest.raises(LintInputError, match="not valid JSON"):
        load_pipeline(write("bad.json", "{\n"))


def test_yaml_error_does_not_quote_the_line(write):
    with pytest.raises(LintInputError) as caught:
        load_pipeline(write("bad.yaml", "producer:\n  sasl.password: hunter2: x\n"))
    assert "hunter2" not in str(caught.value)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("sasl.password=hunter2\\uZZZZ", "the value of sasl.password"),
        ("sasl.password=hunter2\\u12", "the value of sasl.password"),
        ("sasl.password=hunter2\\u+1ab", "the value of sasl.password"),
        ("sasl\\uXYZW.password=hunter2", "the key"),
    ],
)
def test_malformed_unicode_escape_names_file_and_line_never_the_value(text, where):
    with pytest.raises(LintInputError) as caught:
        parse_properties(f"acks=all\n{text}\n", source="b.properties")
    message = str(caught.value)
    assert message.startswith(
        f"[KAFKA_EOS.LINT.INVALID_INPUT] b.properties:2: {where} has a malformed \\uXXXX escape"
    )
    assert "hunter2" not in message and "ZZZZ" not in message
    assert caught.value.__context__ is None, "no chained error quoting the digits"


def test_source_section_is_the_kafka_eos_source(write):
    lint_input = load_pipeline(
        write(
            "p.yaml",
            "source: {subscribe: orders, kafka.Enable.Auto.Commit: false,"
            " kafka.auto.offset.reset: earliest, kafka.fetch.min.bytes: 1}\n",
        )
    )
    assert lint_input.kafka_eos_source
    assert lint_input.consumer == {"fetch.min.bytes": "1"}, "refused options are not config"
    assert lint_input.source_option("kafka.enable.auto.commit") == "false"
    assert lint_input.source_option("kafka.auto.offset.reset") == "earliest"
    assert not load_pipeline(write("c.yaml", "consumer: {group.id: g}\n")).kafka_eos_source


def test_pipeline_max_idle_time(write):
    lint_input = load_pipeline(write("p.yaml", "timing: {max_idle_time: 14d}\n"))
    assert lint_input.timing == Timing(max_idle_time_ms=14 * 86_400_000)
