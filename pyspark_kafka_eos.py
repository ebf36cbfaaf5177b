"""Makes ``format("kafka-eos")`` work in any Spark session where kafka-eos is installed.

PySpark registers Python data sources by itself: at a session's first data-source lookup, a
Python worker imports every top-level module whose name starts with ``pyspark_`` and
registers its ``DefaultSource`` (``pyspark/sql/worker/lookup_data_sources.py``). This module
is that hook; ``connectors.spark.register(spark)`` stays for explicit use.
"""

from connectors.spark.datasource import KafkaEosDataSource as DefaultSource

__all__ = ["DefaultSource"]
