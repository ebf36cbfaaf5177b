"""The ``kafka-eos`` data source: a thin class that only picks the reader or writer.

Like Flink's ``KafkaSink``, it wires parts together and holds no logic: the source lives in
``connectors.spark.source``, the sink in ``connectors.spark.sink`` (streams) and
``connectors.spark.batch_sink`` (batch writes). Both are imported lazily so
that a job that only reads never loads the sink (and the other way round).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSource

if TYPE_CHECKING:
    from pyspark.sql.datasource import (
        DataSourceReader,
        DataSourceStreamReader,
        DataSourceStreamWriter,
        DataSourceWriter,
    )
    from pyspark.sql.types import StructType


class KafkaEosDataSource(DataSource):
    """``format("kafka-eos")``: a drop-in for Spark's built-in ``kafka`` format."""

    @classmethod
    def name(cls) -> str:
        return "kafka-eos"

    def schema(self) -> StructType:
        from connectors.spark.source import source_schema

        return source_schema(self.options)

    def reader(self, schema: StructType) -> DataSourceReader:
        from connectors.spark.source import KafkaBatchReader

        return KafkaBatchReader(self.options, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from connectors.spark.source import KafkaStreamReader

        return KafkaStreamReader(self.options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from connectors.spark.batch_sink import batch_writer

        return batch_writer(self.options, schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from connectors.spark.sink import stream_writer

        return stream_writer(self.options, schema)
