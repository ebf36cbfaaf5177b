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


def spark_kafka_jars() -> list[str]:
    """Spark's own Kafka connector (``format("kafka")``), for comparisons with it: resolved
    from Maven Central on first use (``scripts/spark-kafka-jars/fetch.sh``), then cached."""
    version = spark_kafka_version()
    folder = PROJECT_ROOT / ".cache" / "spark-kafka" / version
    if not (folder / ".complete").exists():
        script = PROJECT_ROOT / "scripts" / "spark-kafka-jars" / "fetch.sh"
        subprocess.run([str(script), version], check=True)
    return sorted(str(jar) for jar in folder.glob("*.jar"))


def new_spark_session(
    master: str = "local[2]", app_name: str = "kafka-eos", *, spark_kafka: bool = False
) -> SparkSession:
    """Python workers run ``PYSPARK_PYTHON``; without it they pick the system python3, which
    lacks pyarrow and this project. ``spark_kafka`` adds Spark's own Kafka connector."""
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
    return builder.getOrCreate()
