"""``format("discard")``, for the bench only: a Python sink that reads its Arrow batches and
drops them. Beside Spark's JVM sink it shows what every Python sink pays before it writes a
byte: the rows turned into Arrow in the JVM, sent to a Python worker and read there."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSource, WriterCommitMessage

from connectors.spark.compat import DataSourceStreamArrowWriter
from connectors.spark.worker_heap import freeze_imported_heap

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType


class DiscardDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "discard"

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamArrowWriter:
        return DiscardWriter()


class DiscardWriter(DataSourceStreamArrowWriter):
    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        freeze_imported_heap()  # as our sink does: the best a Python sink can do per task
        for _ in iterator:
            pass
        return WriterCommitMessage()

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass
