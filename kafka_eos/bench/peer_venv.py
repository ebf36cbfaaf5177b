"""A contender that is not ours runs in its own virtualenv under ``.cache/peers/<name>``, set
up by ``scripts/peers/setup.sh <name>`` on first use: its pins (Quix Streams' confluent-kafka,
PyFlink's apache-beam and pyarrow) would otherwise fight the project's own."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from kafka_eos.bench.pipeline import run_measured
from kafka_eos.cluster.base import PROJECT_ROOT


def peer_python(name: str) -> Path:
    """The peer's interpreter, after its idempotent set-up script has run (quietly, once it
    has set the peer up: the bench's own lines stay its only output)."""
    home = PROJECT_ROOT / ".cache" / "peers" / name
    quiet = subprocess.DEVNULL if (home / ".complete").exists() else None
    script = PROJECT_ROOT / "scripts" / "peers" / "setup.sh"
    if subprocess.run([str(script), name], stdout=quiet).returncode != 0:
        raise SystemExit(f"scripts/peers/setup.sh could not set up {name}: above")
    return home / "venv" / "bin" / "python"


def run_peer(name: str, script: str, args: list[str], cwd: Path) -> tuple[dict[str, Any], int]:
    """Runs ``kafka_eos/bench/peers/<script>`` with the peer's interpreter: the JSON summary it
    prints last, and the peak summed RSS of its processes."""
    command = [
        str(peer_python(name)),
        str(PROJECT_ROOT / "kafka_eos" / "bench" / "peers" / script),
        *args,
    ]
    summary, memory = run_measured(command, name, cwd=cwd)
    return summary, memory.peak_bytes
