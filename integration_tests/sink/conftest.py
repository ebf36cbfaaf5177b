"""One Kafka cluster per version label for the sink's tests; each test brings its own topic,
checkpoint and transactional-id prefix, so tests never see each other's data. The suite runs on
one release of each transactions protocol (``PROTOCOL_KAFKA_VERSIONS``); a test that must run
elsewhere too names its labels with :func:`on_kafka` (the fault matrix's smoke case: every
supported release; the fence's tests: brokers without partition verification).

When a version's tests are done, ``kafka-eos txn list`` must find no transaction left open on
its cluster: every crash the tests injected was recovered, or its test ended what it opened
(not with faults removed, ``make test-faults-removed``, where tests stop before recovering).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from connectors.kafka.transactions import TransactionAdmin
from integration_tests.conftest import create_topic
from integration_tests.kafka_fixtures import running_cluster, selected_mode
from integration_tests.sink import harness
from integration_tests.sink.harness import Pipeline
from kafka_eos.cluster import DEFAULT_KAFKA_VERSION, KafkaCluster
from kafka_eos.cluster.base import PROTOCOL_KAFKA_VERSIONS
from kafka_eos.commands.txn import command as txn_command


@pytest.fixture(scope="session", params=PROTOCOL_KAFKA_VERSIONS, ids=lambda v: f"kafka-{v}")
def versioned_kafka(request: pytest.FixtureRequest) -> Iterator[KafkaCluster]:
    with running_cluster(selected_mode(), request.param) as cluster:
        yield cluster
        # With faults removed, each test stops at its first failed assertion, before the
        # recovery that would end what its run left open.
        if not harness.FAULTS_REMOVED:
            _assert_no_lingering_transactions(cluster.bootstrap_servers)


def _assert_no_lingering_transactions(bootstrap_servers: str) -> None:
    listing = CliRunner().invoke(
        txn_command, ["list", "--bootstrap-servers", bootstrap_servers, "--json"]
    )
    assert listing.exit_code == 0, listing.output
    assert json.loads(listing.output)["transactions"] == [], (
        f"kafka-eos txn list after the sink suite found lingering transactions:\n{listing.output}"
    )


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
