"""A deterministic streaming source for tests: the numbers 0..count-1, ``perBatch`` a batch,
split into ``partitions`` input partitions (so into that many tasks downstream)."""

from __future__ import annotations

from collections.abc import Iterator

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from connectors.spark.compat import NextStart, ReadLimit, SupportsTriggerAvailableNow


class _NumbersReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, count: int, per_batch: int, partitions: int) -> None:
        self._count, self._per_batch, self._partitions = count, per_batch, partitions
        self._starts = NextStart()  # PySpark 4.0 and 4.1 pass latestOffset no start

    def initialOffset(self) -> dict[str, int]:
        return {"n": 0}

    def prepareForTriggerAvailableNow(self) -> None:
        """All ``count`` numbers exist from the start; nothing arrives later."""

    def latestOffset(
        self, start: dict[str, int] | None = None, limit: ReadLimit | None = None
    ) -> dict[str, int]:
        start = start if start is not None else self._starts.get(self.initialOffset)
        return {"n": min(start["n"] + self._per_batch, self._count)}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        self._starts.planned(end)
        first, last = start["n"], end["n"]
        return [
            InputPartition((first + i, last, self._partitions)) for i in range(self._partitions)
        ]

    def read(self, partition: InputPartition) -> Iterator[tuple[int]]:
        first, last, step = partition.value
        yield from ((n,) for n in range(first, last, step))


class NumbersSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "kafka-eos-test-numbers"

    def schema(self) -> str:
        return "n long"

    def streamReader(self, schema: object) -> DataSourceStreamReader:
        return _NumbersReader(
            int(self.options["count"]),
            int(self.options.get("perBatch", self.options["count"])),
            int(self.options.get("partitions", "1")),
        )
