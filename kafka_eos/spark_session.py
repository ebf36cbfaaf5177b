"""A real SparkSession on this venv's Python: for the demo job and the tests."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import TYPE_CHECKING

from kafka_eos.cluster.base import PROJECT_ROOT

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


# Spark's Kafka connector for each PySpark line: it must match Spark's runtime (4.2.0 fails on
# Spark 4.0 with NoSuchFieldError: TOPIC_PARTITIONS). Each is the newest release whose
# spark-token-provider-kafka jar is on Maven Central (4.0.1-4.0.4 and 4.1.2-4.1.3 lack it;
# 4.3.0 is not there at all): 4.2.0 runs on pyspark 4.3.
SPARK_KAFKA_VERSIONS = {"4.0": "4.0.0", "4.1": "4.1.1", "4.2": "4.2.0", "4.3": "4.2.0"}


def spark_kafka_version() -> str:
    """The connector release for the installed PySpark."""
    import pyspark

    return SPARK_KAFKA_VERSIONS[".".join(pyspark.__version__.split(".")[:2])]


S3A_HADOOP_VERSION = "3.5.0"  # hadoop-aws must be the Hadoop of PySpark 4.3's jars


def spark_kafka_jars() -> list[str]:
    """Spark's own Kafka connector (``format("kafka")``), for comparisons with it: resolved
    from Maven Central on first use (``scripts/spark-kafka-jars/fetch.sh``), then cached."""
    return _cached_jars("spark-kafka", spark_kafka_version(), "spark-kafka-jars")


def s3a_jars() -> list[str]:
    """hadoop-aws and the AWS SDK modules S3A loads, for checkpoints on ``s3a://``: resolved
    on first use (``scripts/s3a-jars/fetch.sh``), then cached."""
    return _cached_jars("s3a", S3A_HADOOP_VERSION, "s3a-jars")


def _cached_jars(cache: str, version: str, script: str) -> list[str]:
    folder = PROJECT_ROOT / ".cache" / cache / version
    if not (folder / ".complete").exists():
        subprocess.run([str(PROJECT_ROOT / "scripts" / script / "fetch.sh"), version], check=True)
    return sorted(str(jar) for jar in folder.glob("*.jar"))


def new_spark_session(
    master: str = "local[2]",
    app_name: str = "kafka-eos",
    *,
    spark_kafka: bool = False,
    s3a: bool = False,
    conf: dict[str, str] | None = None,
) -> SparkSession:
    """Python workers run ``PYSPARK_PYTHON``; without it they pick the system python3, which
    lacks pyarrow and this project. ``spark_kafka`` adds Spark's own Kafka connector; ``s3a``
    the S3A jars, on the class path: with ``spark.jars`` alone, the checkpoint manager does not
    find ``org.apache.hadoop.fs.s3a.S3A``. ``conf``: more settings (``spark.hadoop.fs.s3a.*``)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.streaming.stopTimeout", "30s")
    )
    if spark_kafka:
        builder = builder.config("spark.jars", ",".join(spark_kafka_jars()))
    if s3a:
        classpath = os.pathsep.join(s3a_jars())
        builder = builder.config("spark.driver.extraClassPath", classpath)
        builder = builder.config("spark.executor.extraClassPath", classpath)
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
