"""``format("kafka-eos")`` with no ``register()`` call and no option of its own, in a fresh
process (issue 14): a job written for Spark's Kafka source and sink, with the format renamed.

kafka-eos is built as a wheel and installed into a directory of its own, which the job's
process (and, through ``PYTHONPATH``, Spark's Python workers) finds: what ``pip install
kafka-eos`` gives a user. The job imports nothing of kafka-eos; Spark's data-source lookup must
find ``pyspark_kafka_eos`` by itself. It runs on ``local-cluster``: two executor JVMs, each
with its own Python workers, as in a real cluster, so the tasks' readers and writers are
unpickled in processes that never saw the driver's imports.

The development install (``pip install -e``) serves the packages through an import hook that
Spark's lookup (``pkgutil.iter_modules``) does not see; a job run from it must call
``register()``, as the demo does. The wheel is what users install.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from connectors.kafka.sink.naming import derived_prefix
from connectors.kafka.transactions import TransactionAdmin
from integration_tests.source.conftest import produce
from kafka_eos.cluster import KafkaCluster
from kafka_eos.operations.drain import drain

pytestmark = [pytest.mark.kafka, pytest.mark.spark]
ROOT = Path(__file__).resolve().parent.parent
_JOB_TIMEOUT_S = 300

_JOB = textwrap.dedent(
    """
    import sys

    from pyspark.sql import SparkSession

    bootstrap, source, sink, checkpoint = sys.argv[1:5]
    spark = (
        SparkSession.builder.master("local-cluster[2,1,1024]")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    rows = (
        spark.read.format("kafka-eos")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .load()
        .count()
    )
    print(f"batch rows {rows}", flush=True)
    query = (
        spark.readStream.format("kafka-eos")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("key", "value")
        .writeStream.format("kafka-eos")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    spark.stop()
    """
)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """kafka-eos as a user installs it: its wheel, unpacked into a directory of its own."""
    wheels, target = tmp_path_factory.mktemp("wheel"), tmp_path_factory.mktemp("site")
    pip = [sys.executable, "-m", "pip", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", str(ROOT), "-w", str(wheels)], check=True)
    [wheel] = wheels.glob("kafka_eos-*.whl")
    subprocess.run([*pip, "install", "--no-deps", "--target", str(target), str(wheel)], check=True)
    assert (target / "pyspark_kafka_eos.py").exists()
    return target


def test_a_fresh_job_finds_the_format_without_register(
    kafka: KafkaCluster, topic_factory, installed: Path, tmp_path: Path
) -> None:
    bootstrap = kafka.bootstrap_servers
    source, sink = topic_factory(partitions=2), topic_factory(partitions=2)
    produce(bootstrap, source, range(200))
    job = tmp_path / "job.py"
    job.write_text(_JOB)
    env = {
        **os.environ,
        "PYTHONPATH": str(installed),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    result = subprocess.run(
        [sys.executable, str(job), bootstrap, source, sink, str(tmp_path / "checkpoint")],
        env=env,
        cwd=tmp_path,  # not the repository: nothing of kafka-eos on the path but the wheel
        capture_output=True,
        text=True,
        timeout=_JOB_TIMEOUT_S,
    )
    # The driver's traceback, not the cluster's noise as it winds down after it.
    assert result.returncode == 0, result.stderr[result.stderr.find("Traceback") :][:4000]
    assert "batch rows 200" in result.stdout
    written = Counter(int(r.key) for r in drain(bootstrap, sink, "read_committed"))
    assert written == Counter(range(200))
    # With the sink's defaults (item 2): transactions under the prefix derived from the
    # checkpoint location, with the timeout chosen from the brokers' maximum (Kafka's default).
    prefix = derived_prefix(str(tmp_path / "checkpoint"))
    with TransactionAdmin({"bootstrap.servers": bootstrap}) as admin:
        ended = admin.describe(admin.list_transactional_ids(prefix, ongoing_only=False))
    assert ended and {d.timeout_ms for d in ended.values() if d} == {900_000}
