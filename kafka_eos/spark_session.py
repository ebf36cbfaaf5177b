"""A real SparkSession on this venv's Python: for the demo job and the tests."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import TYPE_CHECKING

from kafka_eos.cluster.base import PROJECT_ROOT

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


SPARK_KAFKA_VERSION = "4.2.0"  # 4.3.0 is not on Maven Central; 4.2.0 runs on pyspark 4.3


def spark_kafka_jars() -> list[str]:
    """Spark's own Kafka connector (``format("kafka")``), for comparisons with it: resolved
    from Maven Central on first use (``scripts/spark-kafka-jars/fetch.sh``), then cached."""
    folder = PROJECT_ROOT / ".cache" / "spark-kafka" / SPARK_KAFKA_VERSION
    if not (folder / ".complete").exists():
        script = PROJECT_ROOT / "scripts" / "spark-kafka-jars" / "fetch.sh"
        subprocess.run([str(script), SPARK_KAFKA_VERSION], check=True)
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
