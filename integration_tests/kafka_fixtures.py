"""Which Kafka a test gets, and how it is started and stopped.

The first that applies wins:
1. ``KAFKA_BOOTSTRAP_SERVERS`` is set: an external cluster, used as it is (never stopped here);
2. a Docker engine is reachable: the local image through testcontainers;
3. otherwise: the same jars as local KRaft processes.
``KAFKA_EOS_KAFKA_MODE=docker|process`` forces a mode; ``KAFKA_VERSION`` picks the version.

A version label is a release, optionally with the ``transaction.version`` its cluster is
formatted with when that is not the release's default (``4.3.1-tv1`` is Kafka 4.3.1 on
transactions V1), and optionally ``-nv``: KIP-890's partition verification turned off
(``transaction.partition.verification.enable=false``, Kafka 3.6+), as on a broker before 3.6
(:func:`cluster_spec`).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field

import pytest
from click.testing import CliRunner
from confluent_kafka.admin import AdminClient
from kafka import errors as Errors
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

from kafka_eos.cluster import DEFAULT_KAFKA_VERSION, KafkaCluster, ProcessCluster
from kafka_eos.commands.txn import command as txn_command

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
    """The mode of the rules above; with ``CI`` set, Docker's only, since CI claims to have
    tested the images users run (a silent fall-back to processes would test something else)."""
    mode = _preferred_mode()
    if os.environ.get("CI") and mode != "docker":
        raise RuntimeError(
            f"CI is set, and the Kafka clusters would run in {mode} mode: CI runs them in "
            "Docker only. Start the engine (make docker-engine) and unset "
            "KAFKA_EOS_KAFKA_MODE and KAFKA_BOOTSTRAP_SERVERS, or unset CI for a local run."
        )
    return mode


def _preferred_mode() -> str:
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
    spec = cluster_spec(version)
    release, features = spec.release, spec.features
    properties = {**TEST_BROKER_DEFAULTS, **spec.broker_properties, **(broker_properties or {})}
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


class ClusterPool:
    """A session's clusters by version label, each started on first use and shared by every
    file that asks for its label: a cluster start costs 5 to 8 s, and a session-scoped
    parametrised fixture restarts its cluster whenever the next test has another label, which
    was every file on 4.3.1 and 3.9.2.

    The ``keep`` labels stay up to the session's end. Any other label's cluster is stopped when
    another such label is asked for, so at most one of them runs beside the kept ones.
    ``on_stop`` checks each cluster before it is stopped.
    """

    def __init__(
        self, mode: str, keep: frozenset[str], on_stop: Callable[[KafkaCluster], None]
    ) -> None:
        self._mode = mode
        self._keep = keep
        self._on_stop = on_stop
        self._running: dict[str, tuple[KafkaCluster, ExitStack]] = {}

    def get(self, label: str) -> KafkaCluster:
        if label not in self._running:
            if label not in self._keep:
                for other in [o for o in self._running if o not in self._keep]:
                    self._stop(other)
            stack = ExitStack()
            self._running[label] = (
                stack.enter_context(running_cluster(self._mode, label)),
                stack,
            )
        return self._running[label][0]

    def close(self) -> None:
        """Check and stop every cluster; a failed check fails after all are stopped."""
        failures = []
        for label in list(self._running):
            try:
                self._stop(label)
            except AssertionError as exc:
                failures.append(f"kafka-{label}: {exc}")
        assert not failures, "\n".join(failures)

    def _stop(self, label: str) -> None:
        cluster, stack = self._running.pop(label)
        with stack:
            self._on_stop(cluster)


def assert_no_lingering_transactions(cluster: KafkaCluster) -> None:
    """``kafka-eos txn list``, as an operator would run it, finds no open transaction."""
    listing = CliRunner().invoke(
        txn_command, ["list", "--bootstrap-servers", cluster.bootstrap_servers, "--json"]
    )
    assert listing.exit_code == 0, listing.output
    assert json.loads(listing.output)["transactions"] == [], (
        f"kafka-eos txn list after the tests found lingering transactions:\n{listing.output}"
    )


# The transactions version a new cluster of each supported major release finalizes: V2
# (KIP-890, epoch bump at EndTxn) from 4.0, none (V1) before. The sink's tests are labelled by
# version because the protocol differs between the two.
_TRANSACTION_VERSION = {"4": 2, "3": None}
# A label's variants: the transaction.version the cluster is formatted with instead, and
# partition verification off.
_VARIANTS = re.compile(r"^(?P<release>\d+\.\d+\.\d+)(?:-tv(?P<tv>\d+))?(?P<nv>-nv)?$")
VERIFICATION = "transaction.partition.verification.enable"


@dataclass(frozen=True)
class ClusterSpec:
    """What a version label names: the release, the features its storage is formatted with,
    and the broker properties it runs with."""

    release: str
    features: dict[str, int] = field(default_factory=dict)
    broker_properties: dict[str, str] = field(default_factory=dict)


def cluster_spec(version: str) -> ClusterSpec:
    """What a version label names.

    >>> cluster_spec("4.3.1-tv1")
    ClusterSpec(release='4.3.1', features={'transaction.version': 1}, broker_properties={})
    >>> cluster_spec("3.9.2-nv").broker_properties
    {'transaction.partition.verification.enable': 'false'}
    """
    match = _VARIANTS.match(version)
    if match is None:
        raise ValueError(
            f"Kafka version label {version!r}: expected 4.3.1, 4.3.1-tv<level> or 3.9.2-nv"
        )
    tv = match["tv"]
    return ClusterSpec(
        match["release"],
        {} if tv is None else {"transaction.version": int(tv)},
        {VERIFICATION: "false"} if match["nv"] else {},
    )


def expected_transaction_version(version: str) -> int | None:
    """The finalized ``transaction.version`` a cluster with this label must show; None for
    none (level 0 is not finalized: Kafka names no feature at level 0)."""
    spec = cluster_spec(version)
    if "transaction.version" in spec.features:
        return spec.features["transaction.version"] or None
    return _TRANSACTION_VERSION[spec.release.split(".")[0]]


def _verification(admin: KafkaAdminClient, node_id: int) -> str:
    """A broker's transaction.partition.verification.enable, as it runs with it."""
    resource = ConfigResource(ConfigResourceType.BROKER, str(node_id))
    answer = admin.describe_configs([resource], config_filter="all")
    return str(answer["broker"][str(node_id)].get(VERIFICATION, {}).get("value"))


def _verifications(bootstrap_servers: str, brokers: Iterable[int]) -> set[str]:
    """:func:`_verification` of each broker. A new broker's registration reaches each broker's
    metadata a moment apart, so kafka-python's first metadata may not know one yet
    (``UnknownBrokerIdError``, seen in CI on a fresh three-node cluster): asked again, with
    fresh metadata, for up to 30 s."""
    deadline = time.monotonic() + 30
    while True:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
        try:
            return {_verification(admin, node_id) for node_id in brokers}
        except Errors.UnknownBrokerIdError:
            if time.monotonic() > deadline:
                raise
        finally:
            admin.close()
        time.sleep(0.5)


# The highest metadata.version level each release line supports (seen on its brokers): a
# broker's release line, told more finely than its API versions tell it (kafka-python takes a
# 4.4 broker for 4.3).
RELEASE_LINE_BY_METADATA_VERSION = {11: "3.5", 21: "3.9", 30: "4.3", 33: "4.4"}


def assert_cluster_is(bootstrap_servers: str, version: str) -> None:
    """Fail unless the brokers are the release line a test is labelled with, finalize the
    transactions version that the label implies (the release's default, or its ``-tv<level>``
    variant), and verify partitions as it says (``-nv``: not): a test labelled 3.9.2 that ran
    against a 4.x cluster (an external one, a stale image), one labelled 4.3.1-tv1 that ran on
    transactions V2, or one labelled 3.9.2-nv whose brokers verify, would prove nothing."""
    spec = cluster_spec(version)
    line = ".".join(spec.release.split(".")[:2])
    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
    try:
        features = admin.describe_features()
        brokers = (
            AdminClient({"bootstrap.servers": bootstrap_servers}).list_topics(timeout=10).brokers
        )
    finally:
        admin.close()
    verifying = _verifications(bootstrap_servers, brokers)
    supported = features.get("metadata.version", {}).get("supported", (0, 0))[1]
    seen = RELEASE_LINE_BY_METADATA_VERSION.get(
        supported, f"unknown (metadata.version {supported})"
    )
    finalized = features.get("transaction.version", {}).get("finalized")
    tv = None if finalized is None or finalized[1] == 0 else finalized[1]
    assert seen == line and tv == expected_transaction_version(version), (
        f"the cluster at {bootstrap_servers} is Kafka {seen} with transaction.version {tv}, but "
        f"the tests are labelled Kafka {version}; with KAFKA_BOOTSTRAP_SERVERS set, select the "
        "matching version with KAFKA_VERSION"
    )
    if line != "3.5":  # partition verification came with 3.6
        expected = spec.broker_properties.get(VERIFICATION, "true")
        assert verifying == {expected}, (
            f"the brokers at {bootstrap_servers} run with {VERIFICATION} = {sorted(verifying)}, "
            f"but the tests are labelled Kafka {version}"
        )
