"""A running query moves from Spark's ``format("kafka")`` to ``format("kafka-eos")`` on the
same checkpoint (issue 14): only the format's name changes in the job.

Spark matches a restarted query's sources by position, not by class, and hands the offsets
its Kafka source logged (``{"topic":{"0":5}}``) to ours, which reads that JSON; so the switch
needs no migration step. Spark's own connector (4.2.0 from Maven Central, through
``spark.jars``) writes the checkpoint's first part.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Producer

from checkpoint.store import SnapshotStore
from connectors.kafka.sink.options import decision_location
from integration_tests.conftest import create_topic
from integration_tests.sink.harness import BATCH_1, fill_numbers
from kafka_eos.cluster import KafkaCluster
from kafka_eos.cluster.base import PROJECT_ROOT
from kafka_eos.operations.drain import drain

pytestmark = [pytest.mark.kafka, pytest.mark.spark]
_JOB_TIMEOUT_S = 300


def _run(format_name: str, bootstrap: str, source: str, sink: str, checkpoint: Path) -> None:
    command = [
        sys.executable, "-m", "integration_tests.migration_job", "--format", format_name,
        "--bootstrap", bootstrap, "--input", source, "--output", sink,
        "--checkpoint", str(checkpoint),
    ]  # fmt: skip
    result = subprocess.run(
        command,
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=_JOB_TIMEOUT_S,
    )
    assert result.returncode == 0, result.stderr[result.stderr.find("Traceback") :][:4000]


def _produce_numbers(bootstrap: str, topic: str, numbers: range) -> None:
    """More numbers, n to partition n % 2, as :func:`fill_numbers` wrote the first ones."""
    producer = Producer({"bootstrap.servers": bootstrap})
    for n in numbers:
        producer.produce(topic, key=str(n), value=str(n), partition=n % 2)
    assert producer.flush(60) == 0


def _output(bootstrap: str, sink: str) -> Counter[int]:
    return Counter(int(r.value or b"-1") for r in drain(bootstrap, sink, "read_committed"))


def _batches(checkpoint: Path, log: str) -> list[int]:
    return sorted(int(p.name) for p in (checkpoint / log).iterdir() if p.name.isdigit())


@pytest.mark.parametrize("crashed", [False, True], ids=["stopped", "crashed-mid-batch"])
def test_a_query_switches_from_sparks_kafka_format_mid_stream_and_loses_nothing(
    kafka: KafkaCluster, tmp_path: Path, crashed: bool
) -> None:
    """200 records through Spark's connector (batches 0 and 1), 100 more through kafka-eos.

    ``crashed``: the old query died after its sink wrote batch 1 and before Spark logged the
    batch as done (its ``commits/1`` is removed, the state such a crash leaves). The new
    query replays batch 1 from the offsets Spark's source logged: nothing is lost, and the
    old sink's at-least-once copy of batch 1 stays in the output beside the replay's, the
    duplicates that sink leaves after a crash, which kafka-eos cannot take back.
    """
    bootstrap = kafka.bootstrap_servers
    source, sink = create_topic(bootstrap, partitions=2), create_topic(bootstrap, partitions=2)
    checkpoint = tmp_path / "checkpoint"
    fill_numbers(bootstrap, source, count=200, partitions=2)  # batch k: numbers k*100..
    _run("kafka", bootstrap, source, sink, checkpoint)
    assert _output(bootstrap, sink) == Counter(range(200))
    assert _batches(checkpoint, "commits") == [0, 1]
    if crashed:  # and its checksum: Spark's local files come with one
        for name in ("1", ".1.crc"):
            (checkpoint / "commits" / name).unlink()

    _produce_numbers(bootstrap, source, range(200, 300))
    _run("kafka-eos", bootstrap, source, sink, checkpoint)
    assert _output(bootstrap, sink) == Counter(range(300)) + (BATCH_1 if crashed else Counter())
    # The batches after the switch went through kafka-eos's two-phase commit.
    decided = SnapshotStore(decision_location(str(checkpoint))).checkpoint_ids()
    assert decided and min(decided) == (1 if crashed else 2)
