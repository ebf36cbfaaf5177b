"""KRaft nodes as local JVM processes: no Docker needed, temp dirs and free ports.

Every node is a combined broker+controller with the base configuration the Docker image uses.
Processes are tracked by pid and stopped only through this object.
"""

from __future__ import annotations

import ctypes
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kafka_eos.cluster.base import (
    CLUSTER_ID,
    DEFAULT_KAFKA_VERSION,
    DOCKER_KAFKA_DIR,
    Service,
    format_feature_args,
    multi_node_defaults,
    render_properties,
    wait_until_ready,
)
from kafka_eos.cluster.jars import kafka_libs
from kafka_eos.cluster.ports import free_ports

_STOP_TIMEOUT_S = 30.0
_KEYSTORE_PASSWORD = "kafka-eos-test"  # a throw-away self-signed key in the cluster's temp dir
_PR_SET_PDEATHSIG = 1  # prctl(2)


def _sasl_properties(users: dict[str, str]) -> dict[str, str]:
    """The listener named SASL: SASL_PLAINTEXT with the PLAIN mechanism and these users."""
    accounts = " ".join(f'user_{name}="{password}"' for name, password in users.items())
    return {
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl.plain.sasl.jaas.config": (
            f"org.apache.kafka.common.security.plain.PlainLoginModule required {accounts};"
        ),
    }


def _tls_properties(keystore: Path) -> dict[str, str]:
    """The listener named TLS: SSL with this PKCS12 keystore, no client certificates."""
    return {
        "listener.name.tls.ssl.keystore.location": str(keystore),
        "listener.name.tls.ssl.keystore.type": "PKCS12",
        "listener.name.tls.ssl.keystore.password": _KEYSTORE_PASSWORD,
        "listener.name.tls.ssl.key.password": _KEYSTORE_PASSWORD,
    }


def _make_certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 made with the JDK's keytool (the brokers need a
    JDK anyway): the brokers' PKCS12 keystore, and the certificate as PEM for clients to
    trust (librdkafka's ``ssl.ca.location``, which checks the address against the SAN)."""
    keytool = shutil.which("keytool")
    if keytool is None:
        raise RuntimeError("a TLS listener needs the JDK's keytool on PATH")
    keystore, pem = directory / "broker.p12", directory / "ca.pem"
    store = ["-keystore", str(keystore), "-storetype", "PKCS12", "-storepass", _KEYSTORE_PASSWORD]
    subprocess.run(
        [
            keytool,
            "-genkeypair",
            "-alias",
            "broker",
            "-keyalg",
            "RSA",
            "-keysize",
            "2048",
            "-validity",
            "7",
            "-dname",
            "CN=127.0.0.1",
            "-ext",
            "SAN=IP:127.0.0.1,DNS:localhost",
            "-keypass",
            _KEYSTORE_PASSWORD,
            *store,
        ],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [keytool, "-exportcert", "-rfc", "-alias", "broker", "-file", str(pem), *store],
        check=True,
        capture_output=True,
    )
    return keystore, pem


def _die_with_parent() -> None:
    """A broker must not outlive the fixture or demo that started it, even one killed -9."""
    if sys.platform == "linux":
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass
class _Node:
    node_id: int
    client_port: int
    internal_port: int
    controller_port: int
    sasl_port: int
    tls_port: int
    workdir: Path
    process: subprocess.Popen[bytes] | None = None
    log: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log = self.workdir / "broker.log"


class ProcessCluster(Service):
    """A cluster of ``nodes`` KRaft processes of Kafka ``version``.

    >>> with ProcessCluster(broker_properties={"transaction.max.timeout.ms": "60000"}) as k:
    ...     produce_to(k.bootstrap_servers)
    """

    mode = "process"

    def __init__(
        self,
        version: str = DEFAULT_KAFKA_VERSION,
        nodes: int = 1,
        broker_properties: dict[str, str] | None = None,
        heap: str = "-Xmx512m",
        sasl_users: dict[str, str] | None = None,
        features: Mapping[str, int] | None = None,
        tls: bool = False,
    ) -> None:
        """``sasl_users`` (user name -> password) adds a SASL_PLAINTEXT listener with the
        PLAIN mechanism for clients (:attr:`sasl_bootstrap_servers`), beside the plaintext one
        the readiness checks and tests' own readers use. ``features`` (feature name -> level)
        are finalized when the nodes are formatted, instead of the release's defaults: e.g.
        ``{"transaction.version": 1}`` for a 4.x cluster on transactions V1. ``tls`` adds an
        SSL listener (:attr:`tls_bootstrap_servers`) with a self-signed certificate that
        clients trust through :attr:`tls_ca_location`."""
        self.version = version
        self.features = dict(features or {})
        self._sasl = bool(sasl_users)
        self._libs = kafka_libs(version)
        self._heap = heap
        self._root = Path(tempfile.mkdtemp(prefix=f"kafka-eos-{version}-"))
        ports = iter(free_ports(5 * nodes))  # client, internal, controller, SASL, TLS a node
        self._nodes = {
            node_id: _Node(
                node_id, *(next(ports) for _ in range(5)), self._root / f"node-{node_id}"
            )
            for node_id in range(1, nodes + 1)
        }
        voters = ",".join(
            f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self._nodes.values()
        )
        self._ca_location: Path | None = None
        protocols = {"EXTERNAL": "PLAINTEXT", "INTERNAL": "PLAINTEXT", "CONTROLLER": "PLAINTEXT"}
        extra: dict[str, str] = {}
        if sasl_users:
            protocols["SASL"] = "SASL_PLAINTEXT"
            extra.update(_sasl_properties(sasl_users))
        if tls:
            protocols["TLS"] = "SSL"
            keystore, self._ca_location = _make_certificate(self._root)
            extra.update(_tls_properties(keystore))
        for node in self._nodes.values():
            node.workdir.mkdir(parents=True)
            advertised = (
                f"EXTERNAL://127.0.0.1:{node.client_port},"
                f"INTERNAL://127.0.0.1:{node.internal_port}"
                + (f",SASL://127.0.0.1:{node.sasl_port}" if sasl_users else "")
                + (f",TLS://127.0.0.1:{node.tls_port}" if tls else "")
            )
            properties = {
                "listener.security.protocol.map": ",".join(
                    f"{k}:{v}" for k, v in protocols.items()
                ),
                "node.id": str(node.node_id),
                "controller.quorum.voters": voters,
                "listeners": f"{advertised},CONTROLLER://127.0.0.1:{node.controller_port}",
                "advertised.listeners": advertised,
                "log.dirs": str(node.workdir / "data"),
                **extra,
                **multi_node_defaults(nodes),
                **(broker_properties or {}),
            }
            config = node.workdir / "server.properties"
            config.write_text(
                (DOCKER_KAFKA_DIR / "server.properties").read_text() + render_properties(properties)
            )
            self._java(
                "kafka.tools.StorageTool",
                "format",
                "-t",
                CLUSTER_ID,
                "-c",
                str(config),
                *format_feature_args(self.features),
            )

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> ProcessCluster:
        """Start every node and wait until all are registered; if they never are, stop the
        cluster (a context manager's exit would not run) and say which nodes died, and why."""
        try:
            for node_id in self._nodes:
                self.start_node(node_id, wait=False)
            wait_until_ready(self.bootstrap_servers, len(self._nodes))
        except TimeoutError as exc:
            dead = self._dead_nodes()
            self.stop()
            raise TimeoutError(f"{exc}{dead}") from exc
        except BaseException:
            self.stop()
            raise
        return self

    def _dead_nodes(self) -> str:
        """The nodes whose process exited, each with the last error lines of its log."""
        found = []
        for node in self._nodes.values():
            if node.process is None or node.process.poll() is None:
                continue
            lines = node.log.read_text(errors="replace").splitlines() if node.log.exists() else []
            errors = [line for line in lines if "ERROR" in line or "Exception" in line][-3:]
            found.append(
                f"node {node.node_id} exited {node.process.returncode}: " + " | ".join(errors)
            )
        return "".join(f"; {line}" for line in found)

    def start_node(self, node_id: int, wait: bool = True) -> None:
        node = self._nodes[node_id]
        if node.process is not None and node.process.poll() is None:
            return
        with node.log.open("ab") as log:
            node.process = subprocess.Popen(
                self._java_command("kafka.Kafka", str(node.workdir / "server.properties")),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        if wait:
            wait_until_ready(self.bootstrap_servers, len(self.running_node_ids))

    def stop_node(self, node_id: int, *, hard: bool = False) -> None:
        """Stop one node: SIGTERM for a controlled shutdown, SIGKILL (``hard``) for a crash."""
        node = self._nodes[node_id]
        process, node.process = node.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGKILL if hard else signal.SIGTERM)
        try:
            process.wait(timeout=_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def pause_node(self, node_id: int) -> None:
        """SIGSTOP one node: a GC pause, or a network partition as the others see it."""
        self._running(node_id).send_signal(signal.SIGSTOP)

    def resume_node(self, node_id: int) -> None:
        """SIGCONT a node :meth:`pause_node` stopped."""
        self._running(node_id).send_signal(signal.SIGCONT)

    def _running(self, node_id: int) -> subprocess.Popen[bytes]:
        process = self._nodes[node_id].process
        if process is None or process.poll() is not None:
            raise RuntimeError(f"node {node_id} is not running")
        return process

    def stop(self) -> None:
        """Kill every node: the cluster's data goes with it, so nothing needs a controlled
        shutdown, which waits out ``_STOP_TIMEOUT_S`` when a quorum member is down."""
        for node_id in self._nodes:
            self.stop_node(node_id, hard=True)
        shutil.rmtree(self._root, ignore_errors=True)

    # -- facts -------------------------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{n.client_port}" for n in self._nodes.values())

    @property
    def sasl_bootstrap_servers(self) -> str:
        """The SASL_PLAINTEXT/PLAIN listeners; only with ``sasl_users``."""
        if not self._sasl:
            raise RuntimeError("this cluster was started without sasl_users")
        return ",".join(f"127.0.0.1:{n.sasl_port}" for n in self._nodes.values())

    @property
    def tls_bootstrap_servers(self) -> str:
        """The SSL listeners; only with ``tls``."""
        if self._ca_location is None:
            raise RuntimeError("this cluster was started without tls")
        return ",".join(f"127.0.0.1:{n.tls_port}" for n in self._nodes.values())

    @property
    def tls_ca_location(self) -> str:
        """The PEM certificate a client trusts the TLS listeners with (``ssl.ca.location``)."""
        if self._ca_location is None:
            raise RuntimeError("this cluster was started without tls")
        return str(self._ca_location)

    @property
    def node_ids(self) -> list[int]:
        return list(self._nodes)

    @property
    def running_node_ids(self) -> list[int]:
        return [i for i, n in self._nodes.items() if n.process and n.process.poll() is None]

    def pids(self) -> list[int]:
        return [n.process.pid for n in self._nodes.values() if n.process]

    def log_path(self, node_id: int) -> Path:
        """The node's log (stdout and stderr), deleted with the cluster by :meth:`stop`."""
        return self._nodes[node_id].log

    def log_tail(self, node_id: int, lines: int = 40) -> str:
        log = self._nodes[node_id].log
        return (
            "\n".join(log.read_text(errors="replace").splitlines()[-lines:]) if log.exists() else ""
        )

    # -- helpers -----------------------------------------------------------------------------

    def _java_command(self, main_class: str, *args: str) -> list[str]:
        java = shutil.which("java")
        if java is None:
            raise RuntimeError("process mode needs a Java 17+ runtime on PATH (`java` not found)")
        return [
            java,
            self._heap,
            "-cp",
            f"{self._libs}/*",
            f"-Dlog4j2.configurationFile={DOCKER_KAFKA_DIR / 'log4j2.properties'}",
            main_class,
            *args,
        ]

    def _java(self, main_class: str, *args: str) -> None:
        result = subprocess.run(
            self._java_command(main_class, *args), capture_output=True, text=True
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"{main_class} {' '.join(args)} failed:\n{result.stdout}{result.stderr}"
            )
