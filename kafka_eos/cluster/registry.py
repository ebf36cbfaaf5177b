"""A real schema registry as a local JVM process: Apicurio Registry, from Maven Central.

Apicurio Registry is a Quarkus app; ``scripts/registry/fetch.sh`` unpacks its server (the
runner jar and its ``lib/``) into ``.cache/registry/<version>``. It serves a
Confluent-compatible API at ``/apis/ccompat/v7`` (:attr:`SchemaRegistry.url`), which
``confluent_kafka.schema_registry.SchemaRegistryClient`` speaks. Storage is the server's
default, SQL on an in-memory H2 database: each registry starts empty and keeps nothing once
stopped. The process is tracked by pid and stopped only through this object.

>>> with SchemaRegistry() as registry:
...     SchemaRegistryClient({"url": registry.url}).get_subjects()
[]
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from kafka_eos.cluster.base import PROJECT_ROOT, Service
from kafka_eos.cluster.ports import free_port
from kafka_eos.cluster.process import _die_with_parent

DEFAULT_REGISTRY_VERSION = "3.0.9"
CCOMPAT_PATH = "/apis/ccompat/v7"
FETCH_SCRIPT = PROJECT_ROOT / "scripts" / "registry" / "fetch.sh"

_STOP_TIMEOUT_S = 30.0
_POLL_INTERVAL_S = 0.5


def registry_home(version: str = DEFAULT_REGISTRY_VERSION) -> Path:
    """Return the folder of Apicurio Registry ``version``'s server, fetching it on first use.

    ``KAFKA_EOS_REGISTRY_HOME`` points at an unpacked ``apicurio-registry-app-<version>-all``
    archive instead, for machines without Maven.
    """
    override = os.environ.get("KAFKA_EOS_REGISTRY_HOME")
    if override:
        return Path(override)
    home = PROJECT_ROOT / ".cache" / "registry" / version
    if not (home / ".complete").exists():
        subprocess.run([str(FETCH_SCRIPT), version], check=True)
    return home


class SchemaRegistry(Service):
    """Apicurio Registry ``version`` on a free loopback port, in a temp dir of its own.

    ``start()`` returns once ``GET <url>/subjects`` answers with a JSON list, or raises with
    the tail of the server's log if the process exits or ``startup_timeout_s`` passes first;
    it then stops the process it started but keeps the temp dir, whose log the error names.
    """

    def __init__(
        self,
        version: str = DEFAULT_REGISTRY_VERSION,
        heap: str = "-Xmx384m",
        startup_timeout_s: float = 120.0,
    ) -> None:
        self.version = version
        self._home = registry_home(version)
        self._heap = heap
        self._startup_timeout_s = startup_timeout_s
        self._root = Path(tempfile.mkdtemp(prefix=f"kafka-eos-registry-{version}-"))
        self._log = self._root / "registry.log"
        self.port = free_port()
        self._process: subprocess.Popen[bytes] | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> SchemaRegistry:
        if self._process is not None and self._process.poll() is None:
            return self
        with self._log.open("ab") as log:
            self._process = subprocess.Popen(
                self._java_command(),
                cwd=self._root,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        try:
            self._wait_until_ready()
        except BaseException:
            self._terminate()
            raise
        return self

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after a timeout) and remove its temp dir."""
        self._terminate()
        shutil.rmtree(self._root, ignore_errors=True)

    # -- facts -------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The Confluent-compatible API's base URL, for ``SchemaRegistryClient({"url": ...})``."""
        return f"http://127.0.0.1:{self.port}{CCOMPAT_PATH}"

    @property
    def base_url(self) -> str:
        """The server's root, under which Apicurio's own API is ``/apis/registry/v3``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def log_tail(self, lines: int = 40) -> str:
        if not self._log.exists():
            return ""
        return "\n".join(self._log.read_text(errors="replace").splitlines()[-lines:])

    # -- helpers -----------------------------------------------------------------------------

    def _java_command(self) -> list[str]:
        java = shutil.which("java")
        if java is None:
            raise RuntimeError("the schema registry needs a Java 17+ runtime on PATH")
        runner = self._home / f"apicurio-registry-app-{self.version}-runner.jar"
        if not runner.exists():
            raise RuntimeError(f"no Apicurio Registry server at {runner}: run {FETCH_SCRIPT}")
        return [
            java,
            self._heap,
            f"-Djava.io.tmpdir={self._root}",
            "-Dquarkus.http.host=127.0.0.1",
            f"-Dquarkus.http.port={self.port}",
            f"-Dapicurio.storage.snapshot.location={self._root}",
            "-jar",
            str(runner),
        ]

    def _wait_until_ready(self) -> None:
        assert self._process is not None
        deadline = time.monotonic() + self._startup_timeout_s
        last_error = "no answer yet"
        while time.monotonic() < deadline:
            code = self._process.poll()
            if code is not None:
                raise RuntimeError(
                    f"Apicurio Registry {self.version} exited with status {code} before it "
                    f"answered on {self.url}; log {self._log}:\n{self.log_tail()}"
                )
            try:
                with urllib.request.urlopen(f"{self.url}/subjects", timeout=5) as response:
                    if isinstance(json.load(response), list):
                        return
                    last_error = "GET /subjects did not answer a JSON list"
            except (OSError, ValueError) as error:  # refused, reset, timeout, HTTP error, JSON
                last_error = repr(error)
            time.sleep(_POLL_INTERVAL_S)
        raise RuntimeError(
            f"Apicurio Registry {self.version} did not answer GET {self.url}/subjects within "
            f"{self._startup_timeout_s:.0f} s (last: {last_error}); log {self._log}:\n"
            f"{self.log_tail()}"
        )

    def _terminate(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
