"""``kafka-eos lint`` through click's runner: every input form, both formats, exit codes."""

import json

import pytest

FLINK_PRODUCER = "transaction.timeout.ms=3600000\ntransactional.id=orders-v1\n"
GOOD_PRODUCER = "transaction.timeout.ms=900000\ntransactional.id=orders-v1\n"
GOOD_CONSUMER = (
    "isolation.level=read_committed\nenable.auto.commit=false\nauto.offset.reset=earliest\n"
)

GOOD_PIPELINE = """
sink:
  kafka.transaction.timeout.ms: 900000
  transactionalIdPrefix: orders-v1
  topic: out
source:
  kafka.enable.auto.commit: false
  kafka.auto.offset.reset: earliest
  subscribe: orders
cluster:
  broker_count: 3
  topics:
    out: {replication_factor: 3, config: {min.insync.replicas: "2"}}
    orders: {replication_factor: 3}
"""


@pytest.fixture
def flink(write):
    """``--producer-config`` of a producer with Flink's transaction timeout (1 h), above a
    default broker's maximum: EOS001 and EOS003 fire."""
    return ("--producer-config", write("p.properties", FLINK_PRODUCER))


def test_flink_default_against_default_broker(cli, flink):
    result = cli(*flink)
    assert result.exit_code == 1
    assert "ERRORS (1)" in result.output and "EOS001" in result.output
    assert "transaction.timeout.ms=3600000" in result.output
    assert "transaction.max.timeout.ms=900000" in result.output
    assert "WARNINGS (1)" in result.output and "EOS003" in result.output
    assert "\x1b[" not in result.output


def test_clean_config_exits_zero(cli, write):
    result = cli(
        "--producer-config",
        write("p.properties", GOOD_PRODUCER),
        "--consumer-config",
        write("c.properties", GOOD_CONSUMER),
    )
    assert result.exit_code == 0, result.output
    assert result.output == "no findings (18 rules checked, librdkafka defaults)\n"


@pytest.mark.parametrize(
    "args", [(), ("--output-topic", "out"), ("--max-batch-duration", "2m", "--strict")]
)
def test_nothing_to_lint_is_a_usage_error(cli, args):
    """Defaults alone pass every rule: "no findings" would read as a clean bill of health."""
    result = cli(*args)
    assert result.exit_code == 2
    assert "nothing to lint" in result.output and "--config" in result.output
    assert "no findings" not in result.output


def test_clean_pipeline_file_exits_zero(cli, write):
    result = cli("--config", write("pipeline.yaml", GOOD_PIPELINE))
    assert result.exit_code == 0, result.output


def test_json_pipeline_file(cli, write, validate):
    document = {"sink": {"kafka.transaction.timeout.ms": 60000}, "broker": {}}
    result = cli("--config", write("pipeline.json", json.dumps(document)), "--json")
    report = json.loads(result.output)
    assert validate(report) == []
    # No EOS008: the kafka-eos sink derives a prefix from its checkpoint location.
    assert {f["rule"] for f in report["findings"]} == {"EOS002"}
    assert result.exit_code == 1


def test_json_output_validates_against_the_schema(cli, flink, validate):
    result = cli(*flink, "--json")
    report = json.loads(result.output)
    assert validate(report) == []
    assert report["summary"]["errors"] == 1 and report["summary"]["warnings"] == 1
    assert report["findings"][0]["values"] == {
        "transaction.timeout.ms": "3600000",
        "transaction.max.timeout.ms": "900000",
    }


def test_schema_validator_rejects_a_broken_report(validate):
    assert validate({"version": 2, "findings": [{"rule": "X"}], "summary": {}})


def test_warnings_fail_only_with_strict(cli, write):
    consumer = write("c.properties", "isolation.level=read_committed\nenable.auto.commit=false\n")
    assert cli("--consumer-config", consumer).exit_code == 0
    strict = cli("--consumer-config", consumer, "--strict")
    assert strict.exit_code == 1
    assert "EOS014" in strict.output


def test_broker_config_and_downstream_consumers(cli, write, flink):
    result = cli(
        *flink,
        "--broker-config",
        write("server.properties", "transaction.max.timeout.ms=3600000\n"),
        "--downstream-consumer-config",
        write("billing.properties", "isolation.level=read_uncommitted\n"),
        "--downstream-consumer-config",
        write("audit.properties", "isolation.level=read_committed\n"),
        "--select",
        "EOS001,EOS012",
    )
    assert result.exit_code == 1
    assert "EOS001" not in result.output
    assert "billing.properties isolation.level=read_uncommitted" in result.output
    assert "audit.properties" not in result.output


def test_properties_files_override_the_pipeline_file(cli, write):
    pipeline = write("pipeline.yaml", "producer: {transaction.timeout.ms: 3600000}\n")
    producer = write("p.properties", "transaction.timeout.ms=900000\n")
    result = cli("--config", pipeline, "--producer-config", producer, "--select", "EOS001")
    assert result.exit_code == 0


def test_timing_flags(cli, write):
    producer = write("p.properties", GOOD_PRODUCER)
    assert cli("--producer-config", producer, "--select", "EOS002").exit_code == 0
    result = cli(
        "--producer-config",
        producer,
        "--select",
        "EOS002",
        "--max-batch-duration",
        "10m",
        "--trigger-interval",
        "30s",
        "--max-restart-time",
        "300000",
    )
    assert result.exit_code == 1
    assert "trigger interval 30s + max batch duration 10m + max restart time 5m" in result.output
    broker = write("server.properties", "transactional.id.expiration.ms=86400000\n")
    assert (
        cli("--broker-config", broker, "--select", "EOS009", "--max-checkpoint-age", "7d").exit_code
        == 1
    )


@pytest.mark.parametrize(
    ("config", "select", "flag", "said"),
    [
        pytest.param(
            ("--consumer-config", "c.properties", "group.id=g\n"),
            "EOS012",
            ("--client", "java"),
            ("(java default)", "java defaults"),
            id="client",
        ),
        pytest.param(
            ("--broker-config", "server.properties", "transactional.id.expiration.ms=604800000\n"),
            "EOS009",
            ("--max-idle-time", "14d"),
            ("max idle time 14d",),
            id="max-idle-time",
        ),
    ],
)
def test_a_flag_turns_a_clean_config_into_a_finding(cli, write, config, select, flag, said):
    """--client changes the defaults; --max-idle-time the pause the brokers must outlast."""
    option, name, text = config
    args = (option, write(name, text), "--select", select)
    assert cli(*args).exit_code == 0
    result = cli(*args, *flag)
    assert result.exit_code == 1
    assert all(s in result.output for s in said), result.output


def test_topic_flags_use_pipeline_cluster_facts(cli, write):
    pipeline = write("p.yaml", "cluster: {topics: {out: {replication_factor: 1}}}\n")
    assert cli("--config", pipeline, "--select", "EOS011").output.startswith("no findings")
    result = cli("--config", pipeline, "--select", "EOS011", "--output-topic", "out", "--strict")
    assert result.exit_code == 1
    assert "topic out replication.factor=1" in result.output


def test_ignore(cli, flink):
    result = cli(*flink, "--ignore", "EOS001", "--ignore", "transaction-timeout-stalls-readers")
    assert result.exit_code == 0
    assert "16 rules checked" in result.output


def test_list_rules(cli):
    result = cli("--list-rules")
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert len(lines) == 18
    assert lines[0].startswith("EOS001  error    transaction-timeout-above-broker-max: ")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--producer-config", "/nonexistent.properties"), "does not exist"),
        (("--max-batch-duration", "soon"), "expected a duration"),
        (("--client", "go"), "Invalid value for '--client'"),
        (("--select", "EOS999", "--producer-config", "{producer}"), "unknown rule 'EOS999'"),
        (("-X", "security.protocol", "--producer-config", "{producer}"), "expected KEY=VALUE"),
    ],
)
def test_usage_errors_exit_2(cli, write, args, message):
    producer = str(write("p.properties", GOOD_PRODUCER))
    result = cli(*(arg.format(producer=producer) for arg in args))
    assert result.exit_code == 2
    assert message in result.output


def test_invalid_pipeline_file_exits_2(cli, write):
    result = cli("--config", write("p.yaml", "producer: [1]\n"))
    assert result.exit_code == 2
    assert "producer: expected a mapping" in result.output


def test_unreachable_cluster_exits_2(cli):
    result = cli("--bootstrap-servers", "127.0.0.1:1", "--cluster-timeout", "1s")
    assert result.exit_code == 2
    assert "cluster 127.0.0.1:1" in result.output


def test_under_json_an_unreachable_cluster_is_a_json_error(cli):
    result = cli("--bootstrap-servers", "127.0.0.1:1", "--cluster-timeout", "1s", "--json")
    assert result.exit_code == 2 and result.stderr == ""
    error = json.loads(result.stdout)["error"]
    assert error["code"].startswith("KAFKA_EOS.") and "cluster 127.0.0.1:1" in error["message"]


def test_format_json_still_works_and_says_it_is_deprecated(cli, flink):
    """The spelling before --json, which every command now shares, kept for scripts."""
    result = cli(*flink, "--format", "json")
    assert json.loads(result.stdout)["summary"]["errors"] == 1
    assert "--format is deprecated: use --json" in result.stderr


SPARK_PIPELINE = """
sink: {kafka.transaction.timeout.ms: 900000, transactionalIdPrefix: orders-v1, topic: out}
source:
  {subscribe: orders, kafka.group.id: lag-monitor, startingOffsets: earliest,
   maxOffsetsPerTrigger: 500000}
timing: {max_batch_duration: 6m, max_restart_time: 30s}
rule_options: {EOS002: {safety_factor: 2}}
"""


@pytest.mark.parametrize("client", ["librdkafka", "java"])
def test_correct_spark_pipeline_passes_strict(cli, write, client):
    # Forced enable.auto.commit=false / auto.offset.reset=error, and no group membership.
    pipeline = write("spark.yaml", SPARK_PIPELINE)
    result = cli("--config", pipeline, "--strict", "--client", client)
    assert result.exit_code == 0, result.output


def test_generic_consumer_config_keeps_client_defaults(cli, write):
    consumer = write("c.properties", "group.id=g\nisolation.level=read_committed\n")
    result = cli("--consumer-config", consumer, "--max-batch-duration", "6m", "--strict")
    assert result.exit_code == 1
    assert {"EOS013", "EOS014", "EOS016"} <= set(result.output.split())


def test_live_topics_that_do_not_exist_are_reported(cli, monkeypatch, validate):
    from connectors.kafka import cluster_facts as live
    from connectors.policy.inputs import ClusterFacts, ClusterSnapshot

    def read_cluster(bootstrap_servers, topics, **kwargs):
        facts = ClusterFacts(broker_count=3, missing_topics=frozenset(topics))
        return ClusterSnapshot({}, facts)

    monkeypatch.setattr(live, "read_cluster", read_cluster)
    args = ("--bootstrap-servers", "k:9092", "--output-topic", "out", "--source-topic", "src")
    result = cli(*args, "--strict")
    assert result.exit_code == 0, "info findings never fail a build"
    assert "INFO (2)" in result.output
    assert "output topic out does not exist" in result.output
    assert "source topic src does not exist" in result.output
    assert validate(json.loads(cli(*args, "--json").output)) == []
