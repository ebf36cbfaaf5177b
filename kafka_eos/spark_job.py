"""The Spark side of the demo until the kafka-eos source and sink land: numbers from a Python
data source, squared, written to Kafka one transaction per micro-batch from the driver."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from confluent_kafka import Producer
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit, SupportsTriggerAvailableNow

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


class _NumbersReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, count: int, per_batch: int) -> None:
        self._count, self._per_batch = count, per_batch

    def initialOffset(self) -> dict[str, int]:
        return {"n": 0}

    def prepareForTriggerAvailableNow(self) -> None:
        """All ``count`` numbers exist from the start."""

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        return {"n": min(start["n"] + self._per_batch, self._count)}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        return [InputPartition((start["n"], end["n"]))]

    def read(self, partition: InputPartition) -> Iterator[tuple[int]]:
        yield from ((n,) for n in range(*partition.value))


class NumbersSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "kafka-eos-demo-numbers"

    def schema(self) -> str:
        return "n long"

    def streamReader(self, schema: object) -> DataSourceStreamReader:
        return _NumbersReader(int(self.options["count"]), int(self.options["perBatch"]))


def run_squares_job(bootstrap_servers: str, sink: str, checkpoint: str, count: int) -> int:
    """Run to completion (AvailableNow) and return the number of micro-batches."""
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[*]")
        .appName("kafka-eos-demo")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(NumbersSource)

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        producer = Producer(
            {"bootstrap.servers": bootstrap_servers, "transactional.id": f"demo-{checkpoint}"}
        )
        producer.init_transactions(30)
        producer.begin_transaction()
        for row in batch.collect():
            producer.produce(sink, value=str(row.square).encode())
        producer.commit_transaction(30)

    try:
        query = (
            spark.readStream.format("kafka-eos-demo-numbers")
            .option("count", str(count))
            .option("perBatch", str(max(1, count // 4)))
            .load()
            .selectExpr("n * n AS square")
            .writeStream.foreachBatch(write_batch)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        return len(query.recentProgress)
    finally:
        spark.stop()
