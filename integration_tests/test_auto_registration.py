"""``format("kafka-eos")`` with no ``register()`` call and no option of its own, in a fresh
process (issue 14): a job written for Spark's Kafka source and sink, with the format renamed.

kafka-eos is installed from its wheel (``make wheel``'s, named by ``$KAFKA_EOS_WHEEL``, or one
built here) into a throwaway venv with pip, and the job runs on that venv's interpreter, as do
Spark's Python workers: what a user who installs the wheel gets. The job imports nothing of
kafka-eos; Spark's data-source lookup must find ``pyspark_kafka_eos`` by itself. It runs on
``local-cluster``: two executor JVMs, each with its own Python workers, as in a real cluster,
so the tasks' readers and writers are unpickled in processes that never saw the driver's
imports.

The venv takes its dependencies (PySpark and the rest) from the test's own venv, through a
path in a ``.pth`` file, and the wheel is installed with ``--no-deps``: installing PySpark
again would cost minutes. So this proves the wheel's contents, its install by pip, its entry
point and Spark's lookup of the format, and (``pip check``) that the versions tested satisfy
what the wheel declares; not that pip resolves those dependencies from PyPI.

The development install (``pip install -e``) serves the packages through an import hook that
Spark's lookup (``pkgutil.iter_modules``) does not see; a job run from it must call
``register()``, as the demo does. The wheel is what users install.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
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
    """The interpreter of a throwaway venv into which pip installed kafka-eos's wheel."""
    wheel = _wheel(tmp_path_factory)
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.check_output(
            [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], text=True
        ).strip()
    )
    # A path line of a .pth is put on sys.path, but its own .pth files are not run: the
    # development install's import hook there stays off.
    (site / "kafka_eos_test_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    pip = [sys.executable, "-m", "pip", "-q", "--python", str(python)]
    subprocess.run([*pip, "install", "--no-deps", str(wheel)], check=True)
    subprocess.run([*pip, "check"], check=True)
    assert (site / "pyspark_kafka_eos.py").exists()
    assert list(site.glob("kafka_eos-*.dist-info/licenses/LICENSE"))
    return python


def _wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``make wheel``'s wheel when ``make`` names it, else one built from this tree."""
    built = os.environ.get("KAFKA_EOS_WHEEL")
    if built:
        assert Path(built).is_file(), f"KAFKA_EOS_WHEEL={built} does not exist: run make wheel"
        return Path(built)
    wheels = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "-q", "wheel", "--no-deps", str(ROOT), "-w", str(wheels)],
        check=True,
    )
    [wheel] = wheels.glob("kafka_eos-*.whl")
    return wheel


def test_the_venv_runs_the_wheel(installed: Path, tmp_path: Path) -> None:
    """Every kafka-eos module the job could import, and the command, come from the wheel."""
    where = subprocess.check_output(
        [
            installed,
            "-c",
            "import checkpoint, connectors, kafka_eos, pyspark_kafka_eos\n"
            "for m in (checkpoint, connectors, kafka_eos, pyspark_kafka_eos): print(m.__file__)",
        ],
        cwd=tmp_path,
        env=_env(installed),
        text=True,
    ).split()
    site = installed.parent.parent / "lib"
    assert len(where) == 4 and all(Path(path).is_relative_to(site) for path in where), where
    version = subprocess.check_output([installed.parent / "kafka-eos", "--version"], text=True)
    assert version.startswith("kafka-eos, version ")


def _env(python: Path) -> dict[str, str]:
    """The job's environment: the venv's interpreter for the driver and the workers, and no
    ``PYTHONPATH`` that could lead to this repository."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    return {
        **env,
        "PYSPARK_PYTHON": str(python),
        "PYSPARK_DRIVER_PYTHON": str(python),
        "SPARK_LOCAL_IP": "127.0.0.1",
    }


def test_a_fresh_job_finds_the_format_without_register(
    kafka: KafkaCluster, topic_factory, installed: Path, tmp_path: Path
) -> None:
    bootstrap = kafka.bootstrap_servers
    source, sink = topic_factory(partitions=2), topic_factory(partitions=2)
    produce(bootstrap, source, range(200))
    job = tmp_path / "job.py"
    job.write_text(_JOB)
    result = subprocess.run(
        [installed, str(job), bootstrap, source, sink, str(tmp_path / "checkpoint")],
        env=_env(installed),
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
