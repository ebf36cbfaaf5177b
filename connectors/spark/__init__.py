"""Spark adapters: the ``kafka-eos`` format for ``spark.read``, ``readStream`` and ``writeStream``.

>>> from connectors.spark import register
>>> register(spark)  # then spark.readStream.format("kafka-eos") ...
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from connectors.spark.datasource import KafkaEosDataSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["KafkaEosDataSource", "register"]


def register(spark: SparkSession) -> None:
    """Make ``format("kafka-eos")`` available in this session. PySpark 4.0 refuses a name that
    its auto-registration (``pyspark_kafka_eos``) already gave this installed source: kept."""
    from pyspark.errors import AnalysisException

    try:
        spark.dataSource.register(KafkaEosDataSource)
    except AnalysisException as exc:
        if exc.getCondition() != "DATA_SOURCE_ALREADY_EXISTS":
            raise
