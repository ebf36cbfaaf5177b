"""Fixtures shared by the integration tests: real Kafka clusters and topic helpers."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import Producer

from connectors.kafka.transactions import TransactionAdmin
from connectors.kafka.txn_state import TxnState
from integration_tests.kafka_fixtures import (
    ClusterPool,
    assert_no_lingering_transactions,
    running_cluster,
    selected_mode,
    selected_version,
)
from integration_tests.registry_fixtures import schema_registry  # noqa: F401
from integration_tests.sink.transactions import wait_until_state
from integration_tests.topics import create_topic
from kafka_eos.cluster import KafkaCluster
from kafka_eos.cluster.base import PROTOCOL_KAFKA_VERSIONS
from kafka_eos.spark_session import new_spark_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

KafkaFactory = Callable[..., KafkaCluster]


@pytest.fixture(scope="session")
def kafka_clusters() -> Iterator[ClusterPool]:
    """The session's clusters by version label. The default's and the protocol versions' stay
    up; when they are stopped, ``kafka-eos txn list`` must find no transaction left open on
    them: every crash the tests injected was recovered, or its test ended what it opened (not
    with faults removed, ``make test-faults-removed``, where tests stop before recovering)."""
    from integration_tests.sink.harness import FAULTS_REMOVED

    pool = ClusterPool(
        selected_mode(),
        keep=frozenset({selected_version(), *PROTOCOL_KAFKA_VERSIONS}),
        on_stop=(lambda cluster: None) if FAULTS_REMOVED else assert_no_lingering_transactions,
    )
    yield pool
    pool.close()


@pytest.fixture(scope="session")
def kafka(kafka_clusters: ClusterPool) -> KafkaCluster:
    """The default version's cluster, for tests that need no special broker settings."""
    return kafka_clusters.get(selected_version())


@pytest.fixture
def kafka_factory() -> Iterator[KafkaFactory]:
    """Start clusters of their own for a test: ``kafka_factory(broker_properties=..., nodes=3)``.

    Everything started is stopped when the test ends, by container id or pid.
    """
    with ExitStack() as stack:

        def start(
            broker_properties: dict[str, str] | None = None,
            nodes: int = 1,
            mode: str | None = None,
            version: str | None = None,
        ) -> KafkaCluster:
            return stack.enter_context(
                running_cluster(
                    mode or selected_mode(), version or selected_version(), nodes, broker_properties
                )
            )

        yield start


class TransactionalProducer(Producer):
    """A test's transactional producer whose commit and abort return once the coordinator has
    written the markers. librdkafka returns on EndTxn's answer, which comes first: until the
    markers are in, a read_committed reader stops at the transaction's first offset."""

    def __init__(self, bootstrap_servers: str, transactional_id: str, **config: str) -> None:
        super().__init__(
            {"bootstrap.servers": bootstrap_servers, "transactional.id": transactional_id, **config}
        )
        self.bootstrap_servers, self.transactional_id = bootstrap_servers, transactional_id

    def commit_transaction(self, *timeout: float) -> None:
        super().commit_transaction(*timeout)
        self._wait_until(TxnState.COMPLETE_COMMIT)

    def abort_transaction(self, *timeout: float) -> None:
        super().abort_transaction(*timeout)
        self._wait_until(TxnState.COMPLETE_ABORT)

    def _wait_until(self, state: TxnState) -> None:
        with TransactionAdmin({"bootstrap.servers": self.bootstrap_servers}) as admin:
            wait_until_state(admin, self.transactional_id, state)


def write_transaction(
    bootstrap_servers: str,
    topic: str,
    values: list[str],
    *,
    commit: bool | None,
    timeout_s: float = 30,
) -> TransactionalProducer:
    """One transaction of ``values`` on its own transactional id, flushed into the log, then
    committed (True), aborted (False) or left open (None); returns its producer."""
    producer = TransactionalProducer(bootstrap_servers, f"tx-{uuid.uuid4().hex}")
    producer.init_transactions(timeout_s)
    producer.begin_transaction()
    for value in values:
        producer.produce(topic, value=value.encode())
    assert producer.flush(timeout_s) == 0
    if commit is True:
        producer.commit_transaction(timeout_s)
    elif commit is False:
        producer.abort_transaction(timeout_s)
    return producer


@pytest.fixture
def topic_factory(kafka: KafkaCluster) -> Callable[..., str]:
    return lambda partitions=1, replication=1: create_topic(
        kafka.bootstrap_servers, partitions, replication
    )


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local SparkSession for the session; stopped (JVM and workers) at the end. It has
    Spark's own Kafka connector too, for the conformance suite (``test_conformance.py``)."""
    session = new_spark_session(spark_kafka=True)
    yield session
    session.stop()
