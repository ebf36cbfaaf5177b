"""What every way of running Kafka here shares: versions, the cluster interface, readiness."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol, Self

# The releases the README lists as supported, each tested (docs/testing.md says which tests run
# where). 4.x runs transactions V2 (KIP-890); 3.9 is the last line with transactions V1 only;
# 3.5 is the last release before KIP-890's partition verification (3.6).
DEFAULT_KAFKA_VERSION = "4.3.1"
SUPPORTED_KAFKA_VERSIONS: tuple[str, ...] = ("4.3.1", "3.9.2", "3.5.2", "4.4.0")
# The two on which the sink's whole suite runs: one of each transactions protocol (V2, V1).
PROTOCOL_KAFKA_VERSIONS: tuple[str, ...] = ("4.3.1", "3.9.2")

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DOCKER_KAFKA_DIR = PROJECT_ROOT / "docker" / "kafka"
# A KRaft cluster id is 16 bytes in URL-safe base64 without padding (Kafka 3.5 refuses any other
# length; 3.9 and 4.x take any 22 characters); a fixed one keeps runs repeatable.
CLUSTER_ID = "a2Fma2EtZW9zLWNsdXN0ZQ"


class KafkaCluster(Protocol):
    """A running cluster that the code which started it can bounce and must stop."""

    mode: str
    version: str

    @property
    def bootstrap_servers(self) -> str: ...

    @property
    def node_ids(self) -> list[int]: ...

    def stop_node(self, node_id: int, *, hard: bool = False) -> None: ...

    def start_node(self, node_id: int) -> None: ...

    def stop(self) -> None: ...


class Service:
    """A server started in ``start()`` and stopped in ``stop()``; ``with`` does both:
    ``with ProcessCluster(...) as cluster:`` starts it and binds what ``start()`` returns."""

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def multi_node_defaults(nodes: int) -> dict[str, str]:
    """Durable internal topics for a cluster that can lose a node, single-node values otherwise."""
    if nodes < 3:
        return {}
    return {
        "offsets.topic.replication.factor": "3",
        "transaction.state.log.replication.factor": "3",
        "transaction.state.log.min.isr": "2",
        "default.replication.factor": "3",
        "min.insync.replicas": "2",
    }


def wait_until_ready(bootstrap_servers: str, nodes: int, timeout_s: float = 90.0) -> None:
    """Block until every node is registered as a broker, or raise with the last error seen.

    A node that is only listening cannot yet serve metadata or transactions; waiting for all
    brokers to be registered avoids flaky first requests in tests.
    """
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(
        {"bootstrap.servers": bootstrap_servers, "socket.timeout.ms": 5000, "log_level": 0}
    )
    deadline = time.monotonic() + timeout_s
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            brokers = admin.list_topics(timeout=5).brokers
            if len(brokers) >= nodes:
                return
            last_error = RuntimeError(f"{len(brokers)} of {nodes} brokers registered")
        except Exception as exc:
            last_error = exc
        time.sleep(0.5)
    raise TimeoutError(
        f"Kafka at {bootstrap_servers} was not ready with {nodes} broker(s) after "
        f"{timeout_s:.0f} s: {last_error}"
    )


def render_properties(properties: dict[str, str]) -> str:
    """Java properties text; values here never need escaping (ports, paths, numbers, names)."""
    return "".join(f"{key}={value}\n" for key, value in properties.items())


def render_features(features: Mapping[str, int]) -> str:
    """``name=level`` pairs separated by commas (``KAFKA_FORMAT_FEATURES`` of the image)."""
    return ",".join(f"{name}={level}" for name, level in sorted(features.items()))


def format_feature_args(features: Mapping[str, int]) -> list[str]:
    """``kafka-storage format`` arguments that finalize ``features`` at these levels."""
    args: list[str] = []
    for name, level in sorted(features.items()):
        args += ["--feature", f"{name}={level}"]
    return args
