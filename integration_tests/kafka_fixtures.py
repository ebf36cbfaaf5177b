"""Which Kafka a test gets, and how it is started and stopped.

The first that applies wins:
1. ``KAFKA_BOOTSTRAP_SERVERS`` is set: an external cluster, used as it is (never stopped here);
2. a Docker engine is reachable: the local image through testcontainers;
3. otherwise: the same jars as local KRaft processes.
``KAFKA_EOS_KAFKA_MODE=docker|process`` forces a mode; ``KAFKA_VERSION`` picks the version.

A version label is a release, optionally with the ``transaction.version`` its cluster is
formatted with when that is not the release's default: ``4.3.1-tv1`` is Kafka 4.3.1 on
transactions V1 (:func:`cluster_spec`).
"""

from __future__ import annotations

import os
import re
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
    """Start a cluster in ``mode`` and stop exactly what was started, whatever happens.

    ``version`` is a label (:func:`cluster_spec`): ``4.3.1-tv1`` formats a 4.3.1 cluster with
    ``transaction.version=1``.
    """
    properties = {**TEST_BROKER_DEFAULTS, **(broker_properties or {})}
    release, features = cluster_spec(version)
    cluster: KafkaCluster
    if mode == "external":
        if broker_properties or nodes > 1:
            pytest.skip("this test sets broker properties or node counts: needs its own cluster")
        external = ExternalCluster(os.environ["KAFKA_BOOTSTRAP_SERVERS"])
        assert_cluster_is(external.bootstrap_servers, version)
        yield external
        return
    if mode == "docker":
        from integration_tests.kafka_containers import ContainerCluster

        cluster = ContainerCluster(release, nodes, properties, features=features).start()
    elif mode == "process":
        cluster = ProcessCluster(release, nodes, properties, features=features).start()
    else:
        raise ValueError(f"KAFKA_EOS_KAFKA_MODE={mode!r}: expected docker, process or external")
    try:
        assert_cluster_is(cluster.bootstrap_servers, version)
        yield cluster
    finally:
        cluster.stop()


# The transactions version a new cluster of each supported major release finalizes: V2
# (KIP-890, epoch bump at EndTxn) from 4.0, none (V1) before. The sink's tests are labelled by
# version because the protocol differs between the two.
_TRANSACTION_VERSION = {"4": 2, "3": None}
# A label's variant: the transaction.version the cluster is formatted with instead.
_TV_VARIANT = re.compile(r"^(?P<release>\d+\.\d+\.\d+)(?:-tv(?P<tv>\d+))?$")


def cluster_spec(version: str) -> tuple[str, dict[str, int]]:
    """The release and the format-time features a version label names.

    >>> cluster_spec("4.3.1-tv1")
    ('4.3.1', {'transaction.version': 1})
    >>> cluster_spec("3.9.2")
    ('3.9.2', {})
    """
    match = _TV_VARIANT.match(version)
    if match is None:
        raise ValueError(f"Kafka version label {version!r}: expected 4.3.1 or 4.3.1-tv<level>")
    tv = match["tv"]
    return match["release"], ({} if tv is None else {"transaction.version": int(tv)})


def expected_transaction_version(version: str) -> int | None:
    """The finalized ``transaction.version`` a cluster with this label must show; None for
    none (level 0 is not finalized: Kafka names no feature at level 0)."""
    release, features = cluster_spec(version)
    if "transaction.version" in features:
        return features["transaction.version"] or None
    return _TRANSACTION_VERSION[release.split(".")[0]]


def assert_cluster_is(bootstrap_servers: str, version: str) -> None:
    """Fail unless the brokers are the release a test is labelled with, and finalize the
    transactions version that the label implies (the release's default, or its ``-tv<level>``
    variant): a test labelled 3.9.2 that ran against a 4.x cluster (an external one, a stale
    image), or one labelled 4.3.1-tv1 that ran on transactions V2, would prove nothing."""
    from kafka.admin import KafkaAdminClient
    from kafka.net.compat import KafkaNetClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
    net = KafkaNetClient(bootstrap_servers=bootstrap_servers)
    try:
        features = admin.describe_features()
        seen = net.check_version()  # (major, minor) as the broker's API versions tell
    finally:
        admin.close()
        net.close()
    release, _ = cluster_spec(version)
    expected = tuple(int(part) for part in release.split(".")[:2])
    finalized = features.get("transaction.version", {}).get("finalized")
    tv = None if finalized is None or finalized[1] == 0 else finalized[1]
    assert tuple(seen[:2]) == expected and tv == expected_transaction_version(version), (
        f"the cluster at {bootstrap_servers} speaks Kafka {'.'.join(map(str, seen))} with "
        f"transaction.version {tv}, but the tests are labelled Kafka {version}; with "
        "KAFKA_BOOTSTRAP_SERVERS set, select the matching version with KAFKA_VERSION"
    )
