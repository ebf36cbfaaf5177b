"""Quix Streams exactly-once as a contender: ``quix_job.py`` in Quix's own virtualenv."""

from __future__ import annotations

from kafka_eos.bench.job import Input, Measured
from kafka_eos.bench.peer_venv import run_peer


def quix_run(given: Input, output: str) -> Measured:
    """Quix keeps a state directory in its working directory: the bench's scratch directory,
    not the user's."""
    args = ["--bootstrap", given.bootstrap, "--input-topic", given.topic]
    args += ["--output-topic", output, "--records", str(given.records)]
    summary, rss = run_peer("quix", "quix_job.py", args, given.workdir)
    return Measured(summary["rows"], summary["seconds"], rss)
