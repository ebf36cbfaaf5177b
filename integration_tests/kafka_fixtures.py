"""Which Kafka a test gets, and how it is started and stopped.

The first that applies wins:
1. ``KAFKA_BOOTSTRAP_SERVERS`` is set: an external cluster, used as it is (never stopped here);
2. a Docker engine is reachable: the local image through testcontainers;
3. otherwise: the same jars as local KRaft processes.
``KAFKA_EOS_KAFKA_MODE=docker|process`` forces a mode; ``KAFKA_VERSION`` picks the version.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest

from kafka_eos.cluster import DEFAULT_KAFKA_VERSION, KafkaCluster, ProcessCluster

# Short broker-side timers so that tests of timed-out transactions finish in seconds.
TEST_BROKER_DEFAULTS: dict[str, str] = {
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "2000",
    "transaction.remove.expired.transaction.cleanup.interval.ms": "5000",
}


@dataclass
class ExternalCluster:
    """A cluster someone else runs: we only know where it is."""

    bootstrap_servers: str
    mode: str = "external"
    version: str = field(default_factory=lambda: os.environ.get("KAFKA_VERSION", "unknown"))
    node_ids: list[int] = field(default_factory=list)

    def stop_node(self, node_id: int, *, hard: bool = False) -> None:
        pytest.skip("cannot stop a node of an external cluster")

    def start_node(self, node_id: int) -> None:
        pytest.skip("cannot start a node of an external cluster")

    def stop(self) -> None:
        """Not ours to stop."""


def selected_mode() -> str:
    forced = os.environ.get("KAFKA_EOS_KAFKA_MODE")
    if forced:
        return forced
    if os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
        return "external"
    from integration_tests.kafka_containers import docker_engine_reachable

    return "docker" if docker_engine_reachable() else "process"


def selected_version() -> str:
    return os.environ.get("KAFKA_VERSION", DEFAULT_KAFKA_VERSION)


@contextmanager
def running_cluster(
    mode: str,
    version: str,
    nodes: int = 1,
    broker_properties: dict[str, str] | None = None,
) -> Iterator[KafkaCluster]:
    """Start a cluster in ``mode`` and stop exactly what was started, whatever happens."""
    properties = {**TEST_BROKER_DEFAULTS, **(broker_properties or {})}
    cluster: KafkaCluster
    if mode == "external":
        if broker_properties or nodes > 1:
            pytest.skip("this test sets broker properties or node counts: needs its own cluster")
        yield ExternalCluster(os.environ["KAFKA_BOOTSTRAP_SERVERS"])
        return
    if mode == "docker":
        from integration_tests.kafka_containers import ContainerCluster

        cluster = ContainerCluster(version, nodes, properties).start()
    elif mode == "process":
        cluster = ProcessCluster(version, nodes, properties).start()
    else:
        raise ValueError(f"KAFKA_EOS_KAFKA_MODE={mode!r}: expected docker, process or external")
    try:
        yield cluster
    finally:
        cluster.stop()
