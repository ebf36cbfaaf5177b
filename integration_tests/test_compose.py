"""The compose files users run (``docker/compose*.yaml``) start a faithful transactional Kafka.

Each file is brought up under a project name of its own on free ports, must serve a
committed and an aborted transaction correctly to a ``read_committed`` reader, and is taken
down with its volumes whatever happens. The three-node file must also keep serving
transactions, and keep what was committed, while one of its nodes is killed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from integration_tests.conftest import create_topic, write_transaction
from integration_tests.kafka_containers import docker_engine_reachable, ensure_image
from kafka_eos.cluster import DEFAULT_KAFKA_VERSION
from kafka_eos.cluster.base import DOCKER_KAFKA_DIR, wait_until_ready
from kafka_eos.cluster.ports import free_port, free_ports
from kafka_eos.operations.drain import drain

pytestmark = pytest.mark.kafka

COMPOSE_DIR = DOCKER_KAFKA_DIR.parent


@contextmanager
def compose_up(file: Path, ports: dict[str, int]) -> Iterator[Callable[..., None]]:
    """``docker-compose up`` under a fresh project; yields a runner for more compose calls."""
    if not docker_engine_reachable():
        pytest.fail("no Docker engine reachable: run scripts/docker-engine.sh start")
    if shutil.which("docker-compose") is None:
        pytest.fail("no docker-compose: run scripts/docker-engine.sh start, which installs it")
    ensure_image(DEFAULT_KAFKA_VERSION)
    command = ["docker-compose", "-f", str(file), "-p", f"kafka-eos-{uuid.uuid4().hex[:8]}"]
    env = {**os.environ, "KAFKA_VERSION": DEFAULT_KAFKA_VERSION}
    env.update({name: str(port) for name, port in ports.items()})

    def run(*args: str) -> None:
        subprocess.run([*command, *args], env=env, check=True, capture_output=True, timeout=120)

    try:
        run("up", "-d")
        yield run
    finally:
        run("down", "-v", "--timeout", "10")


def _committed(bootstrap: str, topic: str) -> list[str]:
    return sorted(r.value.decode() for r in drain(bootstrap, topic, timeout_s=60))


def test_single_node_compose_file() -> None:
    port = free_port()
    with compose_up(COMPOSE_DIR / "compose.yaml", {"KAFKA_EOS_PORT": port}):
        bootstrap = f"localhost:{port}"
        wait_until_ready(bootstrap, nodes=1)
        topic = create_topic(bootstrap)
        write_transaction(bootstrap, topic, ["c1", "c2"], commit=True, timeout_s=60)
        write_transaction(bootstrap, topic, ["a1"], commit=False, timeout_s=60)
        assert _committed(bootstrap, topic) == ["c1", "c2"]
        assert len(drain(bootstrap, topic, "read_uncommitted", timeout_s=60)) == 3


def test_three_node_compose_file_survives_a_killed_node() -> None:
    ports = dict(zip((f"KAFKA_EOS_PORT_{i}" for i in (1, 2, 3)), free_ports(3), strict=True))
    with compose_up(COMPOSE_DIR / "compose-cluster.yaml", ports) as compose:
        bootstrap = ",".join(f"localhost:{port}" for port in ports.values())
        wait_until_ready(bootstrap, nodes=3)
        topic = create_topic(bootstrap, partitions=3, replication=3)
        write_transaction(bootstrap, topic, ["before"], commit=True, timeout_s=60)
        compose("kill", "kafka-2")
        write_transaction(bootstrap, topic, ["during"], commit=True, timeout_s=60)
        write_transaction(bootstrap, topic, ["aborted"], commit=False, timeout_s=60)
        assert _committed(bootstrap, topic) == ["before", "during"]
