"""One Kafka cluster per version label for the sink's tests; each test brings its own topic,
checkpoint and transactional-id prefix, so tests never see each other's data. The suite runs on
one release of each transactions protocol (``PROTOCOL_KAFKA_VERSIONS``); a test that must run
elsewhere too names its labels with :func:`on_kafka` (the fault matrix's smoke case: every
supported release; the fence's tests: brokers without partition verification).

The clusters come from the session's pool (``kafka_clusters``, integration_tests/conftest.py),
which checks that nothing was left open on them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from connectors.kafka.transactions import TransactionAdmin
from integration_tests.kafka_fixtures import ClusterPool
from integration_tests.sink.harness import Pipeline
from integration_tests.topics import create_topic
from kafka_eos.cluster import DEFAULT_KAFKA_VERSION, KafkaCluster
from kafka_eos.cluster.base import PROTOCOL_KAFKA_VERSIONS


# Session-scoped so that pytest runs a file's tests grouped by label (the pool stops a rare
# label's cluster when the next rare label is asked for).
@pytest.fixture(scope="session", params=PROTOCOL_KAFKA_VERSIONS, ids=lambda v: f"kafka-{v}")
def versioned_kafka(request: pytest.FixtureRequest, kafka_clusters: ClusterPool) -> KafkaCluster:
    return kafka_clusters.get(request.param)


def on_kafka(*labels: str) -> pytest.MarkDecorator:
    """Run the test on these version labels instead of ``PROTOCOL_KAFKA_VERSIONS``."""
    return pytest.mark.parametrize(
        "versioned_kafka", labels, indirect=True, ids=[f"kafka-{v}" for v in labels]
    )


# For a scenario whose protocol is the same under transactions V1 and V2 (docs/testing.md
# lists which): it runs on the default version only, which keeps `make test` within budget.
default_version_only = on_kafka(DEFAULT_KAFKA_VERSION)


@pytest.fixture
def pipeline(versioned_kafka: KafkaCluster, tmp_path: Path) -> Pipeline:
    bootstrap = versioned_kafka.bootstrap_servers
    return Pipeline(bootstrap, create_topic(bootstrap, partitions=2), tmp_path / "checkpoint")


@pytest.fixture
def admin(versioned_kafka: KafkaCluster) -> Iterator[TransactionAdmin]:
    with TransactionAdmin({"bootstrap.servers": versioned_kafka.bootstrap_servers}) as client:
        yield client
