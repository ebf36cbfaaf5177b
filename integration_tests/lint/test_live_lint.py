"""``kafka-eos lint --bootstrap-servers`` against a real broker.

The module's one-broker cluster runs with ``transaction.max.timeout.ms=300000`` (and a
transaction log it can actually host) and injects one misconfiguration: a producer timeout
above that maximum, an output topic with replication factor 1, topics that do not exist,
or none at all.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from integration_tests.conftest import create_topic
from integration_tests.kafka_fixtures import running_cluster, selected_mode, selected_version
from kafka_eos.commands.lint import command

pytestmark = pytest.mark.kafka

BROKER_PROPERTIES = {
    "transaction.max.timeout.ms": "300000",
    # One broker: the coordinator must be able to create __transaction_state at all.
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
}
# A window of 10s + 30s + 1m = 100s: 2 x 100s fits under the broker's 5 minute maximum.
QUICK_TIMING = (
    "--trigger-interval",
    "10s",
    "--max-batch-duration",
    "30s",
    "--max-restart-time",
    "1m",
)
GOOD_CONSUMER = (
    "isolation.level=read_committed\nenable.auto.commit=false\nauto.offset.reset=earliest\n"
)


@pytest.fixture(scope="module")
def bootstrap_servers() -> Iterator[str]:
    """One broker for the module: each test's misconfiguration is in its own files and topics."""
    with running_cluster(selected_mode(), selected_version(), 1, BROKER_PROPERTIES) as cluster:
        yield cluster.bootstrap_servers


def properties(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def lint(bootstrap_servers: str, *args: str) -> Result:
    return CliRunner().invoke(
        command,
        [
            "--bootstrap-servers",
            bootstrap_servers,
            "--cluster-timeout",
            "30s",
            "--json",
            *args,
        ],
        catch_exceptions=False,
    )


def test_producer_timeout_above_live_broker_maximum_is_eos001(
    bootstrap_servers: str, tmp_path: Path
) -> None:
    producer = properties(
        tmp_path, "p.properties", "transaction.timeout.ms=900000\ntransactional.id=lint-it\n"
    )
    result = lint(bootstrap_servers, "--producer-config", producer)
    report = json.loads(result.output)
    [finding] = [f for f in report["findings"] if f["rule"] == "EOS001"]
    assert finding["severity"] == "error"
    assert finding["values"] == {
        "transaction.timeout.ms": "900000",
        "transaction.max.timeout.ms": "300000",
    }
    assert result.exit_code == 1


def test_output_topic_with_replication_factor_one_is_eos011(bootstrap_servers: str) -> None:
    topic = create_topic(bootstrap_servers)
    result = lint(bootstrap_servers, "--output-topic", topic, "--select", "EOS011")
    report = json.loads(result.output)
    messages = [f["message"] for f in report["findings"] if f["rule"] == "EOS011"]
    assert any(f"topic {topic} replication.factor=1" in m for m in messages), messages
    assert result.exit_code == 0
    assert (
        lint(bootstrap_servers, "--output-topic", topic, "--select", "EOS011", "--strict").exit_code
        == 1
    )


def test_correct_config_exits_zero(bootstrap_servers: str, tmp_path: Path) -> None:
    source, output = create_topic(bootstrap_servers), create_topic(bootstrap_servers)
    producer = properties(
        tmp_path, "p.properties", "transaction.timeout.ms=300000\ntransactional.id=lint-it\n"
    )
    consumer = properties(tmp_path, "c.properties", GOOD_CONSUMER)
    result = lint(
        bootstrap_servers,
        "--producer-config",
        producer,
        "--consumer-config",
        consumer,
        "--downstream-consumer-config",
        consumer,
        "--source-topic",
        source,
        "--output-topic",
        output,
        *QUICK_TIMING,
    )
    report = json.loads(result.output)
    assert report["summary"]["errors"] == 0, report["findings"]
    # RF 1 on a one-broker cluster is only a durability warning.
    assert {f["rule"] for f in report["findings"]} <= {"EOS011"}
    assert result.exit_code == 0


def test_topics_missing_on_the_cluster_are_info_findings(bootstrap_servers: str) -> None:
    missing = f"lint-missing-{uuid.uuid4().hex[:10]}"
    result = lint(
        bootstrap_servers,
        "--output-topic",
        missing,
        "--source-topic",
        missing,
        "--select",
        "EOS011,EOS015",
        "--strict",
    )
    report = json.loads(result.output)
    assert {(f["rule"], f["severity"]) for f in report["findings"]} == {
        ("EOS011", "info"),
        ("EOS015", "info"),
    }
    assert all(f["values"] == {"topic": missing} for f in report["findings"])
    assert result.exit_code == 0
