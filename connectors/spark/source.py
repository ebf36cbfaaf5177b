"""``format("kafka-eos")`` for reading: Spark's Python Data Source adapter of the Kafka source.

Thin on purpose: options, offsets, planning and reading live in ``connectors.kafka``; this module
only maps them onto Spark's reader interfaces. Where each method runs:

- ``__init__`` runs wherever Spark plans the read, and the reader is then **pickled to the
  executors** with ``read``: it holds parsed options only and opens no connection.
- ``KafkaStreamReader``: ``initialOffset``, ``latestOffset``, ``partitions``, ``commit`` and
  ``stop`` run in one long-lived Python process on the driver per query, which keeps the Kafka
  consumer used for metadata and offsets; ``read`` runs on executors, one task per range.
- ``KafkaBatchReader``: ``partitions`` runs once on the driver, ``read`` on executors.

>>> from connectors.spark import register
>>> register(spark)
>>> (spark.readStream.format("kafka-eos")
...     .option("kafka.bootstrap.servers", "localhost:9092")
...     .option("subscribe", "orders")
...     .option("maxOffsetsPerTrigger", 100000)
...     .load())
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Mapping

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.pandas.types import from_arrow_type
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from connectors.avro.batches import BatchDecoder
from connectors.kafka.source.errors import SourceOptionError
from connectors.kafka.source.offsets import from_json_dict, to_json_dict
from connectors.kafka.source.options import AvroReading, SourceOptions, parse_avro
from connectors.kafka.source.planner import StreamPlanner, batch_read_ranges
from connectors.kafka.source.range_reader import read_range
from connectors.kafka.source.ranges import OffsetRange, split_ranges
from connectors.spark.compat import (
    NextStart,
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
    arrow_schema,
    own_limit_warning,
)
from connectors.spark.worker_heap import freeze_imported_heap

_log = logging.getLogger(__name__)
# Spark's built-in Kafka source schema, field for field.
_FIELDS = [
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
]
_HEADERS = StructField(
    "headers",
    ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())])),
)


def source_schema(options: Mapping[str, str]) -> StructType:
    """The row schema; ``headers`` is there only with ``includeHeaders=true``, as in Spark.
    An Avro ``key`` or ``value`` has the type of its schema (connectors.avro)."""
    flags = {key.lower(): str(value).strip().lower() for key, value in options.items()}
    return _schema(flags.get("includeheaders") == "true", _decoder(parse_avro(options)))


def _schema(with_headers: bool, decoder: BatchDecoder | None = None) -> StructType:
    schema = StructType([*_FIELDS, _HEADERS] if with_headers else _FIELDS)
    if decoder is None:
        return schema
    # Explicit: the default was False before PySpark 4.2 (now a naive timestamp is NTZ).
    types = {
        name: from_arrow_type(arrow, prefer_timestamp_ntz=True) for name, arrow in decoder.fields()
    }
    fields = [StructField(f.name, types.pop(f.name, f.dataType)) for f in schema.fields]
    return StructType(fields + [StructField(name, type_) for name, type_ in types.items()])


def _decoder(avro: AvroReading | None) -> BatchDecoder | None:
    """The decoder of the Avro columns, each with its schema: the given one, or the latest of
    its subject (read here, on the driver, once per query start)."""
    if avro is None:
        return None
    columns = [column.resolved(avro.topic, SourceOptionError) for column in avro.columns]
    return BatchDecoder(columns, permissive=avro.permissive)


class KafkaInputPartition(InputPartition):
    """One Spark task: an offset range, small and picklable."""

    def __init__(self, offset_range: OffsetRange) -> None:
        super().__init__(offset_range)


class _KafkaRead:
    """What both readers share: parsed options, group ids, and ``read`` on the executors."""

    def __init__(self, options: Mapping[str, str], schema: StructType, *, streaming: bool) -> None:
        self._options: SourceOptions = SourceOptions.parse(options, streaming=streaming)
        self._decoder = _decoder(self._options.avro)
        if schema != _schema(self._options.include_headers, self._decoder):
            raise SourceOptionError(
                "schema",
                schema.simpleString(),
                "the Kafka source has a fixed schema; remove .schema(...) and cast the key and "
                "value columns instead (an Avro column takes the type of its schema: "
                "valueSchema, or the subject's latest when the query started)",
            )
        self._schema = schema
        # Assign-only consumers never join a group; the ids only name the clients, as Spark's.
        unique = f"{self._options.group_id_prefix}-{uuid.uuid4().hex[:12]}"
        self._driver_group = self._options.group_id or f"{unique}-driver"
        self._executor_group = self._options.group_id or f"{unique}-executor"

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        freeze_imported_heap()
        # Spark hands over InputPartition(None) when a batch query planned no range.
        if not isinstance(partition, KafkaInputPartition):
            return iter(())
        if self._decoder is None:
            schema = arrow_schema(self._schema)
            return read_range(partition.value, self._options, self._executor_group, schema)
        # Read as Kafka has it, then decode: a malformed value names its offset.
        kafka = arrow_schema(_schema(self._options.include_headers))
        batches = read_range(partition.value, self._options, self._executor_group, kafka)
        return self._decoder.decode(batches, arrow_schema(self._schema))

    def _tasks(self, ranges: list[OffsetRange]) -> list[KafkaInputPartition]:
        options = self._options
        pieces = split_ranges(ranges, options.min_partitions, options.max_records_per_partition)
        return [KafkaInputPartition(piece) for piece in pieces]


class KafkaBatchReader(_KafkaRead, DataSourceReader):
    """``spark.read.format("kafka-eos")``: offsets from startingOffsets to endingOffsets."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        super().__init__(options, schema, streaming=False)

    def partitions(self) -> list[KafkaInputPartition]:
        return self._tasks(batch_read_ranges(self._options, self._driver_group))


class KafkaStreamReader(_KafkaRead, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("kafka-eos")``: the offset in Spark's log is the snapshot.
    How the start is made durable, and batch 0 replayed, is
    :class:`connectors.kafka.source.planner.StreamPlanner`'s."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        super().__init__(options, schema, streaming=True)
        self._planner = StreamPlanner(self._options, self._driver_group)
        self._starts = NextStart()  # PySpark 4.0 and 4.1 only (connectors.spark.compat)
        if (warning := own_limit_warning(self._options.max_offsets_per_trigger)) is not None:
            _log.warning(warning)

    def initialOffset(self) -> dict:
        return to_json_dict(self._planner.initial_offsets())

    def getDefaultReadLimit(self) -> ReadLimit:
        if self._options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self._options.max_offsets_per_trigger)
        if self._options.min_offsets_per_trigger is not None:
            return ReadMinRows(self._options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Fix the end now: partitions and records that appear later wait for the next run."""
        self._planner.fix_end_now()

    def latestOffset(self, start: dict | None = None, limit: ReadLimit | None = None) -> dict:
        """The end of the next batch: everything available, or as much as the limit admits.

        Spark passes ``ReadAllAvailable`` for ``Trigger.Once`` and must then get everything;
        otherwise the limit is the one from ``getDefaultReadLimit``. Spark's Python API has no
        composite limit, so ``minOffsetsPerTrigger`` is applied from the options by the
        planner. PySpark 4.0 and 4.1 pass neither a start nor a limit: see
        connectors.spark.compat.
        """
        if start is None or limit is None:
            start, limit = self._starts.get(self.initialOffset), self.getDefaultReadLimit()
        begin = from_json_dict(
            start, what="the start offset Spark passed to latestOffset", symbolic=True
        )
        end = self._planner.next_end(
            begin,
            all_available=isinstance(limit, ReadAllAvailable),
            max_rows=limit.max_rows if isinstance(limit, ReadMaxRows) else None,
        )
        return to_json_dict(end)

    def reportLatestOffset(self) -> dict | None:
        """The newest offsets, for ``StreamingQueryProgress``'s ``latestOffset`` (PySpark 4.2
        and later; lag = latest - end, :mod:`connectors.spark.lag`): under ``read_committed``
        the high watermarks, so a hanging transaction shows as lag that never falls."""
        latest = self._planner.latest_for_progress()
        return to_json_dict(latest) if latest is not None else None

    def partitions(self, start: dict, end: dict) -> list[KafkaInputPartition]:
        begin = from_json_dict(start, what="the batch start in Spark's offset log", symbolic=True)
        self._starts.planned(end)
        return self._tasks(self._planner.ranges(begin, end))

    def commit(self, end: dict) -> None:
        """For lag monitoring only, when ``kafka.group.id`` is set; recovery never reads it."""
        self._planner.commit(end)

    def stop(self) -> None:
        self._planner.close()
