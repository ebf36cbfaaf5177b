"""Spark works here: a local SparkSession runs a streaming query through a Python data source."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit, SupportsTriggerAvailableNow

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


class _CounterReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are plain integers; each micro-batch yields at most five numbers, up to 20."""

    _STEP, _END = 5, 20

    def initialOffset(self) -> dict[str, int]:
        return {"n": 0}

    def prepareForTriggerAvailableNow(self) -> None:
        """Everything up to ``_END`` is available now; nothing arrives later."""

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        return {"n": min(start["n"] + self._STEP, self._END)}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        return [InputPartition((start["n"], end["n"]))]

    def read(self, partition: InputPartition) -> Iterator[tuple[int]]:
        first, last = partition.value
        for n in range(first, last):
            yield (n,)


class CounterSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "kafka-eos-test-counter"

    def schema(self) -> str:
        return "n int"

    def streamReader(self, schema: object) -> DataSourceStreamReader:
        return _CounterReader()


def test_streaming_query_through_python_data_source(spark: SparkSession, tmp_path: object) -> None:
    spark.dataSource.register(CounterSource)
    query = (
        spark.readStream.format("kafka-eos-test-counter")
        .load()
        .selectExpr("n", "n * n AS square")
        .writeStream.format("memory")
        .queryName("counter_squares")
        .option("checkpointLocation", str(tmp_path))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    rows = sorted(tuple(r) for r in spark.table("counter_squares").collect())
    assert rows == [(n, n * n) for n in range(20)]
    # Four micro-batches of five: the reader's offsets really moved between triggers.
    assert len(query.recentProgress) == 4
