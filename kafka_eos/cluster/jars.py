"""Locate, or fetch from Maven Central, the jars of one Apache Kafka version."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from kafka_eos.cluster.base import DOCKER_KAFKA_DIR, PROJECT_ROOT


def kafka_libs(version: str) -> Path:
    """Return the folder of Kafka ``version``'s jars, resolving them with Maven on first use.

    ``KAFKA_EOS_KAFKA_LIBS`` points at an existing folder of jars instead (for example an
    unpacked Apache Kafka distribution's ``libs/``), for machines without Maven.
    """
    override = os.environ.get("KAFKA_EOS_KAFKA_LIBS")
    if override:
        return Path(override)
    libs = PROJECT_ROOT / ".cache" / "kafka" / version / "libs"
    if not (libs / ".complete").exists():
        subprocess.run([str(DOCKER_KAFKA_DIR / "fetch-jars.sh"), version], check=True)
    return libs
