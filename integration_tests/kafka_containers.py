"""Kafka through testcontainers: the locally built ``kafka-eos/kafka:<version>`` image.

Ryuk (testcontainers' reaper) cannot be pulled here, so containers are stopped explicitly by
this object, by container id. Ports are mapped at random; because the advertised listener must
name the mapped port, each container waits for an override file that is written once the port
is known (see ``docker/kafka/entrypoint.sh``).
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Mapping

from kafka_eos.cluster.base import (
    CLUSTER_ID,
    DOCKER_KAFKA_DIR,
    Service,
    multi_node_defaults,
    render_features,
    render_properties,
    wait_until_ready,
)

os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")

from testcontainers.core.container import DockerContainer
from testcontainers.core.network import Network

CLIENT_PORT = 9092
_OVERRIDES = "/opt/kafka/config/override.properties"
# A test's broker lives seconds to minutes, and the suite keeps both cores busy: C1 alone and
# the serial collector halve a broker's start (11.8 s of CPU to 6.2 s, to ready plus 30 s) and
# cut its idle cost by a quarter (2.5 s to 1.8 s a minute), process mode on Kafka 4.3.1,
# 2026-11-29. Test brokers only: the image and the compose files keep the JVM's defaults.
_TEST_BROKER_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def docker_engine_reachable() -> bool:
    try:
        import docker

        docker.from_env(timeout=5).ping()
        return True
    except Exception:
        return False


def ensure_image(version: str) -> str:
    """Build the image if missing (idempotent, seconds when it exists) and return its tag."""
    subprocess.run([str(DOCKER_KAFKA_DIR / "build.sh"), version], check=True)
    return f"kafka-eos/kafka:{version}"


class ContainerCluster(Service):
    """``nodes`` combined broker+controller containers on a private Docker network."""

    mode = "docker"

    def __init__(
        self,
        version: str,
        nodes: int = 1,
        broker_properties: dict[str, str] | None = None,
        features: Mapping[str, int] | None = None,
    ) -> None:
        """``features`` (feature name -> level) are finalized when the nodes format their
        storage, instead of the release's defaults (``KAFKA_FORMAT_FEATURES`` of the image)."""
        self.version = version
        self.features = dict(features or {})
        image = ensure_image(version)
        self._properties = {**multi_node_defaults(nodes), **(broker_properties or {})}
        self._network = Network()
        voters = ",".join(f"{i}@kafka-{i}:9093" for i in range(1, nodes + 1))
        self._containers = {
            i: DockerContainer(image)
            .with_env("KAFKA_NODE_ID", str(i))
            .with_env("KAFKA_CLUSTER_ID", CLUSTER_ID)
            .with_env("KAFKA_CONTROLLER_QUORUM_VOTERS", voters)
            .with_env("KAFKA_INTERNAL_HOST", f"kafka-{i}")
            .with_env("KAFKA_WAIT_FOR_OVERRIDES", "1")
            .with_env("KAFKA_FORMAT_FEATURES", render_features(self.features))
            .with_env("JDK_JAVA_OPTIONS", _TEST_BROKER_JVM)
            .with_exposed_ports(CLIENT_PORT)
            .with_network_aliases(f"kafka-{i}")
            for i in range(1, nodes + 1)
        }
        self._running: set[int] = set()

    def start(self) -> ContainerCluster:
        self._network.create()
        for container in self._containers.values():
            container.with_network(self._network)
        try:
            for node_id, container in self._containers.items():
                container.start()
                self._running.add(node_id)
                self._send_overrides(node_id)
            wait_until_ready(self.bootstrap_servers, len(self._containers))
        except BaseException:
            self.stop()
            raise
        return self

    def _send_overrides(self, node_id: int) -> None:
        """Tell the waiting entrypoint its advertised address, now that the mapped port exists."""
        container = self._containers[node_id]
        host = container.get_container_host_ip()
        port = container.get_exposed_port(CLIENT_PORT)
        text = render_properties(
            {
                **self._properties,
                "advertised.listeners": (
                    f"EXTERNAL://{host}:{port},INTERNAL://kafka-{node_id}:19092"
                ),
            }
        )
        tmp = f"{_OVERRIDES}.tmp"
        result = container.exec(
            ["sh", "-c", f"printf %s {shlex.quote(text)} > {tmp} && mv {tmp} {_OVERRIDES}"]
        )
        if result.exit_code != 0:
            raise RuntimeError(f"could not configure kafka-{node_id}: {result.output!r}")

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(
            f"{c.get_container_host_ip()}:{c.get_exposed_port(CLIENT_PORT)}"
            for i, c in self._containers.items()
            if i in self._running
        )

    @property
    def node_ids(self) -> list[int]:
        return list(self._containers)

    def stop_node(self, node_id: int, *, hard: bool = False) -> None:
        """``docker kill`` (SIGKILL) for a crash, ``docker stop`` for a controlled shutdown."""
        wrapped = self._containers[node_id].get_wrapped_container()
        if hard:
            wrapped.kill()
        else:
            wrapped.stop(timeout=30)
        self._running.discard(node_id)

    def start_node(self, node_id: int) -> None:
        self._containers[node_id].get_wrapped_container().start()
        self._running.add(node_id)
        # A restarted container gets a new mapped port, and waits to be told it again.
        self._containers[node_id].get_wrapped_container().reload()
        self._send_overrides(node_id)
        wait_until_ready(self.bootstrap_servers, len(self._running))

    def logs(self, node_id: int) -> str:
        stdout, stderr = self._containers[node_id].get_logs()
        return (stdout + stderr).decode(errors="replace")

    def stop(self) -> None:
        for node_id, container in self._containers.items():
            if container.get_wrapped_container() is not None:
                container.stop()
            self._running.discard(node_id)
        self._network.remove()
