"""One Kafka cluster per supported version for the sink's tests; each test brings its own
topic, checkpoint and transactional-id prefix, so tests never see each other's data."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from connectors.kafka.transactions import TransactionAdmin
from integration_tests.conftest import create_topic
from integration_tests.kafka_fixtures import running_cluster, selected_mode
from integration_tests.sink.harness import Pipeline
from kafka_eos.cluster import SUPPORTED_KAFKA_VERSIONS, KafkaCluster


@pytest.fixture(scope="session", params=SUPPORTED_KAFKA_VERSIONS, ids=lambda v: f"kafka-{v}")
def versioned_kafka(request: pytest.FixtureRequest) -> Iterator[KafkaCluster]:
    with running_cluster(selected_mode(), request.param) as cluster:
        yield cluster


@pytest.fixture
def pipeline(versioned_kafka: KafkaCluster, tmp_path: Path) -> Pipeline:
    bootstrap = versioned_kafka.bootstrap_servers
    return Pipeline(bootstrap, create_topic(bootstrap, partitions=2), tmp_path / "checkpoint")


@pytest.fixture
def admin(versioned_kafka: KafkaCluster) -> Iterator[TransactionAdmin]:
    with TransactionAdmin({"bootstrap.servers": versioned_kafka.bootstrap_servers}) as client:
        yield client
