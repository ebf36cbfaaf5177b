"""The driver asks Kafka's metadata once per trigger, whatever the number of topics (issue 13,
finding 5), on real Kafka, without Spark.

Each trigger's questions (``latest_since``: the subscription's partitions, then their latest
offsets) are counted on the reader's real clients: a consumer's ``list_topics`` and the admin
client's ``describe_topics`` each send one Metadata request.
"""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions

from connectors.kafka.source.offset_reader import KafkaOffsetReader
from connectors.kafka.source.options import SourceOptions
from integration_tests.source.conftest import produce
from kafka_eos.cluster import KafkaCluster

pytestmark = [pytest.mark.kafka]
TOPICS = 20


class Counting:
    """A real client whose metadata calls are counted."""

    def __init__(self, client: Any, calls: list[str]) -> None:
        self._client, self._calls = client, calls

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def list_topics(self, *args: Any, **kwargs: Any) -> Any:
        self._calls.append("list_topics")
        return self._client.list_topics(*args, **kwargs)

    def describe_topics(self, *args: Any, **kwargs: Any) -> Any:
        self._calls.append("describe_topics")
        return self._client.describe_topics(*args, **kwargs)


class CountingReader(KafkaOffsetReader):
    def __init__(self, options: Any, calls: list[str]) -> None:
        super().__init__(options, "g-metadata")
        self.calls = calls

    def _client(self) -> Any:
        return Counting(super()._client(), self.calls)

    def _admin(self) -> Any:
        return Counting(super()._admin(), self.calls)


@pytest.mark.parametrize("subscription", ["subscribe", "assign", "subscribePattern"])
def test_each_trigger_sends_one_metadata_request_for_every_topic(
    kafka: KafkaCluster, topic_factory, subscription: str
) -> None:
    bootstrap = kafka.bootstrap_servers
    topics = sorted(topic_factory(partitions=2) for _ in range(TOPICS))
    for topic in topics:
        produce(bootstrap, topic, range(3), partition=0)
    keys = {(topic, p) for topic in topics for p in (0, 1)}
    value = {
        "subscribe": ",".join(topics),
        "assign": "{" + ",".join(f'"{t}": [0, 1]' for t in topics) + "}",
        # Exactly these topics: the cluster holds other tests' topics too.
        "subscribePattern": "|".join(topics),
    }[subscription]
    options = SourceOptions.parse(
        {"kafka.bootstrap.servers": bootstrap, subscription: value}, streaming=True
    )
    calls: list[str] = []
    reader = CountingReader(options, calls)
    try:
        start = reader.latest(reader.partitions())
        assert set(start) == keys and set(start.values()) == {0, 3}
        for _ in range(5):
            calls.clear()
            latest, held = reader.latest_since(start)
            assert latest == start and held == {}
            expected = "list_topics" if subscription == "subscribePattern" else "describe_topics"
            assert calls == [expected]
    finally:
        reader.close()


def test_a_named_topic_that_does_not_exist_is_left_out_by_the_one_request(
    kafka: KafkaCluster, topic_factory
) -> None:
    bootstrap, topic = kafka.bootstrap_servers, topic_factory(partitions=2)
    options = SourceOptions.parse(
        {"kafka.bootstrap.servers": bootstrap, "subscribe": f"{topic},{topic}-never-created"},
        streaming=True,
    )
    calls: list[str] = []
    reader = CountingReader(options, calls)
    try:
        assert reader.partitions() == [(topic, 0), (topic, 1)]
        assert calls == ["describe_topics"]
    finally:
        reader.close()


def test_a_partition_added_while_the_query_runs_is_read_at_the_next_trigger(
    kafka: KafkaCluster, topic_factory
) -> None:
    """The driver's consumer no longer asks for the topics' metadata (the admin client does),
    so its cache lacks a partition added since: ListOffsets must refresh it, not fail."""
    bootstrap, topic = kafka.bootstrap_servers, topic_factory(partitions=2)
    produce(bootstrap, topic, range(4), partition=0)
    options = SourceOptions.parse(
        {"kafka.bootstrap.servers": bootstrap, "subscribe": topic}, streaming=True
    )
    reader = CountingReader(options, [])
    try:
        start = reader.latest(reader.partitions())
        assert reader.latest_since(start) == (start, {})
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_partitions([NewPartitions(topic, 3)])[topic].result(timeout=30)
        produce(bootstrap, topic, range(3), partition=2)
        latest, held = reader.latest_since(start)
        assert latest == {**start, (topic, 2): 3} and held == {}
    finally:
        reader.close()
