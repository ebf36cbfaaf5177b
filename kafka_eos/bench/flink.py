"""PyFlink exactly-once as a contender: ``flink_job.py`` in Flink's own virtualenv, with Flink's
Kafka SQL connector from Maven Central (``scripts/peers/setup.sh flink``)."""

from __future__ import annotations

from kafka_eos.bench.job import Input, Measured
from kafka_eos.bench.peer_venv import run_peer
from kafka_eos.cluster.base import PROJECT_ROOT

JARS = PROJECT_ROOT / ".cache" / "peers" / "flink" / "jars"
# Flink commits one transaction per sink subtask at each checkpoint, the Spark contenders one
# per micro-batch of 100,000 records: 2 s is about that many records of 100 B here. A bounded
# job's end waits for one more checkpoint, which commits the last transactions.
CHECKPOINT_INTERVAL_MS = 2000
PARALLELISM = 2  # as Spark's local[2]


def flink_run(given: Input, output: str) -> Measured:
    """The job's net runtime as Flink reports it (its tasks' start, the copy, the final
    checkpoint; the JVM's and the mini-cluster's start excluded). The copy runs on Flink's JVM:
    no Python process does the work, so no Python memory is reported."""
    logs = given.workdir / f"flink-{output}"
    args = ["--bootstrap", given.bootstrap, "--input-topic", given.topic]
    args += ["--output-topic", output, "--jars", str(JARS), "--log-dir", str(logs)]
    args += ["--checkpoint-interval-ms", str(CHECKPOINT_INTERVAL_MS)]
    args += ["--parallelism", str(PARALLELISM), "--transactional-id-prefix", f"bench-{output}"]
    summary, _ = run_peer("flink", "flink_job.py", args, given.workdir)
    return Measured(summary["rows"], summary["seconds"], 0)
