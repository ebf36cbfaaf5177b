"""The batch reader's planning (``spark.read``) when one metadata answer calls a named topic
unknown: the topic is still read, and an ``assign`` query does not fail. No broker."""

from __future__ import annotations

import pytest
from kafka_metadata import FakeCluster

from connectors.kafka.source import client as source_client
from connectors.kafka.source import planner
from connectors.kafka.source.errors import SourceOptionError
from connectors.kafka.source.offset_reader import KafkaOffsetReader
from connectors.kafka.source.ranges import OffsetRange
from connectors.spark.source import KafkaBatchReader, source_schema


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    monkeypatch.setattr(source_client, "_GONE_CONFIRM_S", 0.0)
    monkeypatch.setattr(source_client, "_GONE_POLL_S", 0.0)
    fake = FakeCluster({("orders", 0): 5, ("orders", 1): 3})

    class OverFake(KafkaOffsetReader):
        def _client(self) -> FakeCluster:  # type: ignore[override]
            return fake

        def _admin(self) -> FakeCluster:  # type: ignore[override]
            return fake

    monkeypatch.setattr(planner, "KafkaOffsetReader", OverFake)
    return fake


def plan(**options: str) -> list[OffsetRange]:
    opts = {"kafka.bootstrap.servers": "k:9092", **options}
    return [task.value for task in KafkaBatchReader(opts, source_schema(opts)).partitions()]


def test_a_subscribed_topic_unknown_in_one_answer_is_read(cluster: FakeCluster) -> None:
    cluster.lie_about = "orders"
    assert plan(subscribe="orders") == [
        OffsetRange("orders", 0, 0, 5),
        OffsetRange("orders", 1, 0, 3),
    ]


def test_an_assigned_topic_unknown_in_one_answer_is_read(cluster: FakeCluster) -> None:
    cluster.lie_about = "orders"
    assert plan(assign='{"orders":[1]}') == [OffsetRange("orders", 1, 0, 3)]


def test_an_assigned_partition_confirmed_absent_fails_naming_it(cluster: FakeCluster) -> None:
    with pytest.raises(SourceOptionError, match="orders-7"):
        plan(assign='{"orders":[1,7]}')
