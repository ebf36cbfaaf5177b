"""The main job end to end: Kafka -> kafka-eos source -> Spark -> kafka-eos sink -> Kafka,
killed -9 after a decision and before its commits, restarted, then checked independently by
``kafka-eos verify`` and a read_uncommitted drain."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from kafka_eos.cluster import KafkaCluster
from kafka_eos.operations.drain import drain

pytestmark = [pytest.mark.kafka, pytest.mark.spark]
KAFKA_EOS = str(Path(sys.executable).parent / "kafka-eos")


def test_demo_crashes_recovers_and_verifies_exactly_once(kafka: KafkaCluster) -> None:
    records = 600
    result = subprocess.run(
        [KAFKA_EOS, "demo", "--bootstrap-servers", kafka.bootstrap_servers,
         "--records", str(records)],
        capture_output=True,
        text=True,
        timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    # The crash struck mid-protocol: batch 1 was written and decided, but not yet visible.
    [(written, visible)] = re.findall(
        r"job killed -9 after deciding batch 1.*: (\d+) records written, (\d+) visible",
        result.stdout,
    )
    assert int(written) > int(visible) > 0
    [verify_line] = re.findall(r"^verify again: (kafka-eos verify .*)$", result.stdout, re.M)

    verify = subprocess.run(
        [KAFKA_EOS, *shlex.split(verify_line)[1:], "--json"],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
    report = json.loads(verify.stdout)
    assert report["inputs"] == report["outputs"] == records
    assert report["passed"] and report["open_transactions"] == []
    # Recovery committed the decided batch instead of writing it again: no second copy even
    # in the log.
    output_topic = report["output_topic"]
    assert len(drain(kafka.bootstrap_servers, output_topic, "read_uncommitted")) == records
