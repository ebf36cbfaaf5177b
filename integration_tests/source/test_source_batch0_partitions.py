"""A crash in batch 0 after partitions were added: the restart replays batch 0 over exactly
the partitions of its logged end, and the new partition is read from its earliest offset in
batch 1.

Fault injected: the sink crashes in batch 0 (``Batches(fail_at=0)``); a partition is added to
the topic and written to while the query is down; the query restarts on the same checkpoint.
The restarted driver resolves the start anew (``initialOffset``), now with three partitions,
while ``offsets/0`` names two. Planned against each other, the new partition looked deleted
("its topic was deleted"), and a JSON start naming the two partitions failed ("must name
exactly the partitions"), on every restart.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from integration_tests.source.conftest import (
    Batches,
    add_partitions,
    produce,
    run_to_end,
    run_to_failure,
    start_stream,
)
from kafka_eos.cluster import KafkaCluster

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def _starts(topic: str) -> dict[str, tuple[dict[str, str], range]]:
    """Each start option, and the keys of partitions 0 and 1 it reads (keys 0-49 are in
    partition 0, 50-99 in partition 1; all records have timestamps after 0)."""
    return {
        "earliest": ({"startingOffsets": "earliest"}, range(100)),
        "offsets": ({"startingOffsets": json.dumps({topic: {"0": 5, "1": -2}})}, range(5, 100)),
        "timestamp": ({"startingTimestamp": "0"}, range(100)),
        "timestamps": (
            {"startingOffsetsByTimestamp": json.dumps({topic: {"0": 0, "1": 0}})},
            range(100),
        ),
    }


def _logged_end(checkpoint: Path, batch: int) -> dict:
    return json.loads((checkpoint / "offsets" / str(batch)).read_text().splitlines()[-1])


@pytest.mark.parametrize("start", ["earliest", "offsets", "timestamp", "timestamps"])
def test_a_crash_in_batch_0_then_new_partitions_replays_batch_0_over_its_logged_end(
    source_spark: SparkSession, kafka: KafkaCluster, topic_factory, checkpoint: Path, start: str
) -> None:
    bootstrap, topic = kafka.bootstrap_servers, topic_factory(partitions=2)
    produce(bootstrap, topic, range(50), partition=0)
    produce(bootstrap, topic, range(50, 100), partition=1)
    extra, first_keys = _starts(topic)[start]
    options = {"kafka.bootstrap.servers": bootstrap, "subscribe": topic, **extra}

    sink = Batches(fail_at=0)
    error = run_to_failure(start_stream(source_spark, options, checkpoint, sink))
    assert "injected crash in the middle of batch 0" in error
    assert sink.by_id == {0: list(first_keys)}
    assert set(_logged_end(checkpoint, 0)[topic]) == {"0", "1"}

    # While the query is down: a third partition, records in it and in an old one.
    add_partitions(bootstrap, topic, 3)
    produce(bootstrap, topic, range(100, 150), partition=2)
    produce(bootstrap, topic, range(150, 170), partition=0)

    run_to_end(start_stream(source_spark, options, checkpoint, sink))
    assert sink.by_id[0] == list(first_keys), "the replay of batch 0 read other records"
    assert sorted(sink.by_id[1]) == list(range(100, 170)), "batch 1 reads the rest"
    sink.assert_exactly_once([*first_keys, *range(100, 170)])
    assert all(n == 1 for n in sink.counts().values())


def test_a_new_query_whose_json_start_leaves_out_a_partition_still_fails(
    source_spark: SparkSession, kafka: KafkaCluster, topic_factory, checkpoint: Path
) -> None:
    """The check moved from ``initialOffset`` to the planning of batch 0; it still fails."""
    bootstrap, topic = kafka.bootstrap_servers, topic_factory(partitions=2)
    options = {
        "kafka.bootstrap.servers": bootstrap,
        "subscribe": topic,
        "startingOffsets": json.dumps({topic: {"0": -2}}),
    }
    error = run_to_failure(start_stream(source_spark, options, checkpoint, Batches()))
    assert "must name exactly the partitions being read" in error
    assert f"missing: {topic}-1;" in error
    assert not (checkpoint / "offsets" / "0").exists(), "batch 0 was not planned"
