"""The sink on a cluster that requires authentication (SASL/PLAIN).

Every connection the sink makes must authenticate with the query's credentials: the tasks'
producers (librdkafka), the startup checks, and the driver's transaction admin (kafka-python),
which commits after a crash. A wrong password must stop the query before anything is written,
with an error that says what failed and how to fix it, and never prints the password.
The test's own readers use the cluster's plaintext listener.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from connectors.kafka.txn_state import TxnState
from integration_tests.conftest import create_topic
from integration_tests.kafka_fixtures import TEST_BROKER_DEFAULTS
from integration_tests.sink.harness import KILLED, Pipeline, assert_exactly_once, assert_ran
from kafka_eos.cluster import ProcessCluster

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

USER, PASSWORD = "eos-sink", "eos-sink-secret"


@pytest.fixture(scope="module")
def sasl_cluster() -> Iterator[ProcessCluster]:
    with ProcessCluster(broker_properties=TEST_BROKER_DEFAULTS, sasl_users={USER: PASSWORD}) as k:
        yield k


def _sasl_options(cluster: ProcessCluster, password: str) -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": cluster.sasl_bootstrap_servers,
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "PLAIN",
        "kafka.sasl.username": USER,
        "kafka.sasl.password": password,
    }


@pytest.fixture
def pipeline(sasl_cluster: ProcessCluster, tmp_path: Path) -> Pipeline:
    bootstrap = sasl_cluster.bootstrap_servers  # plaintext: the test's own readers
    return Pipeline(bootstrap, create_topic(bootstrap, partitions=2), tmp_path / "checkpoint")


def test_every_connection_authenticates_including_the_commit_after_a_crash(
    sasl_cluster: ProcessCluster, pipeline: Pipeline
) -> None:
    options = _sasl_options(sasl_cluster, PASSWORD)
    # Killed after the decision of batch 1: the restart's commit goes through the admin alone.
    assert_ran(pipeline.run("driver.before_end_txn@1#1", options=options), KILLED)
    assert pipeline.store().checkpoint_ids() == [0, 1] and not pipeline.store().is_confirmed(1)
    tids = pipeline.decided_transactional_ids(1)
    assert len(tids) == 2, tids
    assert pipeline.transaction_states(tids) == dict.fromkeys(tids, TxnState.ONGOING)
    assert pipeline.committed() == Counter(range(100))
    assert pipeline.uncommitted() == Counter(range(200))

    assert_ran(pipeline.run(options=options))
    assert_exactly_once(pipeline)
    assert pipeline.uncommitted() == Counter(range(300))


def test_a_wrong_password_stops_the_query_before_anything_is_written(
    sasl_cluster: ProcessCluster, pipeline: Pipeline
) -> None:
    wrong = "not-the-password"
    result = pipeline.run(options=_sasl_options(sasl_cluster, wrong), timeout_s=180)
    assert_ran(result, 1)
    assert wrong not in result.stderr and wrong not in result.stdout
    for needle in ("uthentication", "kafka.sasl.username", "kafka.sasl.password"):
        assert needle in result.stderr, f"the error does not name {needle!r}"
    assert pipeline.uncommitted() == Counter()
    assert pipeline.open_transactions() == []
