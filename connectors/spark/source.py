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

from checkpoint.errors import DeadlineExceeded
from connectors.avro.batches import BatchDecoder
from connectors.kafka.source.admission import (
    TriggerDelay,
    available_now_end,
    backlog,
    pin_latest,
    rate_limit,
    with_new_partitions,
)
from connectors.kafka.source.errors import KafkaSourceError, SourceOptionError, report_data_loss
from connectors.kafka.source.lag import PinnedLso, pinned_warning
from connectors.kafka.source.offset_reader import KafkaOffsetReader, not_exactly_named
from connectors.kafka.source.offsets import (
    EARLIEST,
    LATEST,
    PartitionKey,
    PartitionOffsets,
    describe,
    from_json_dict,
    to_json_dict,
)
from connectors.kafka.source.options import (
    AvroReading,
    BoundKind,
    SourceOptions,
    parse_avro,
)
from connectors.kafka.source.range_reader import read_range
from connectors.kafka.source.ranges import OffsetRange, batch_ranges, plan_ranges, split_ranges
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
        options = self._options
        kafka = KafkaOffsetReader(options, self._driver_group)
        try:
            keys = _partitions_to_start(kafka, options)
            start = kafka.resolve(options.starting, keys)
            end = kafka.resolve(options.ending, keys)
            latest = end if options.ending.kind == BoundKind.LATEST else kafka.latest(keys)
        finally:
            kafka.close()
        ranges = batch_ranges(
            start,
            end,
            latest,
            starting=options.starting.option,
            ending=options.ending.option,
            end_by_timestamp=options.ending.kind.by_timestamp,
            fail_on_data_loss=options.fail_on_data_loss,
        )
        return self._tasks(ranges)


class KafkaStreamReader(_KafkaRead, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("kafka-eos")``: the offset in Spark's log is the snapshot.

    How the start is made durable (a Python reader never sees the checkpoint, so it cannot
    keep its initial offsets there as Spark's Kafka source does):

    1. ``initialOffset`` resolves the starting option once per process and caches it, but
       keeps "latest" as -1: Spark asks again on every trigger until batch 0 is planned, and
       again when it replays batch 0 after a restart.
    2. The first ``latestOffset`` pins every -1 to the latest offset and admits nothing: batch
       0 reads nothing and only writes the pinned start to Spark's offset log.
    3. ``partitions`` of a start holding -1 plans nothing, so a replay of batch 0 reads the same
       (empty) range however "latest" moved; batch 1 starts at the pinned offsets.

    A concrete start (earliest, timestamps, offsets) is resolved again by a restarted driver
    that replays batch 0, and may then name partitions added since batch 0 was planned. Batch
    0 is replayed over exactly the partitions of its logged end; the new ones are found by
    batch 1 and read from their log starts, as any partition found after the start
    (:meth:`partitions`). For the same reason a JSON start that leaves out existing partitions
    fails when this process plans batch 0 (``latestOffset``), not in ``initialOffset``: at a
    replay, the left-out partitions are the new ones, and the batch 0 being replayed passed
    the check when it was planned.
    """

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        super().__init__(options, schema, streaming=True)
        self._kafka = KafkaOffsetReader(self._options, self._driver_group)
        low, delay = self._options.min_offsets_per_trigger, self._options.max_trigger_delay_s
        self._delay = TriggerDelay(low, delay) if low is not None else None
        self._initial: PartitionOffsets | None = None  # Step 1: stable within this process
        # A JSON start that leaves out partitions: raised if this process plans batch 0.
        self._unnamed: SourceOptionError | None = None
        # The end latestOffset last gave for the initial start: a batch 0 that this process
        # planned, and so not a replay of one logged by an earlier driver.
        self._end_from_initial: PartitionOffsets | None = None
        self._target: PartitionOffsets | None = None  # the end of Trigger.AvailableNow
        self._latest: PartitionOffsets | None = None
        self._pinned: PinnedLso | None = None  # created with the first latestOffset
        self._starts = NextStart()  # PySpark 4.0 and 4.1 only (connectors.spark.compat)
        if (warning := own_limit_warning(self._options.max_offsets_per_trigger)) is not None:
            _log.warning(warning)

    def initialOffset(self) -> dict:
        # Step 1
        if self._initial is None:
            starting = self._options.starting
            keys = _partitions_to_start(self._kafka, self._options)
            named = set(starting.offsets) if starting.kind.per_partition else None
            if named is not None and named < set(keys):
                # Maybe a replay of batch 0, after partitions were added: see the class doc.
                self._unnamed = not_exactly_named(starting, keys)
                keys = sorted(named)
            self._initial = self._kafka.resolve(starting, keys, keep_latest=True)
        return to_json_dict(self._initial)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self._options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self._options.max_offsets_per_trigger)
        if self._options.min_offsets_per_trigger is not None:
            return ReadMinRows(self._options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Fix the end now: partitions and records that appear later wait for the next run."""
        self._target = self._kafka.latest(self._kafka.partitions())

    def latestOffset(self, start: dict | None = None, limit: ReadLimit | None = None) -> dict:
        """The end of the next batch: everything available, or as much as the limit admits.

        Spark passes ``ReadAllAvailable`` for ``Trigger.Once`` and must then get everything;
        otherwise the limit is the one from ``getDefaultReadLimit``. Spark's Python API has no
        composite limit, so ``minOffsetsPerTrigger`` is applied from the options here, and it
        is ignored under ``Trigger.AvailableNow``, where waiting for more data would never end.
        PySpark 4.0 and 4.1 pass neither a start nor a limit: see connectors.spark.compat.
        """
        if start is None or limit is None:
            start, limit = self._starts.get(self.initialOffset), self.getDefaultReadLimit()
        begin = from_json_dict(
            start, what="the start offset Spark passed to latestOffset", symbolic=True
        )
        if begin != self._initial:
            return to_json_dict(self._end(begin, limit))
        if self._unnamed is not None:
            raise self._unnamed  # this process plans batch 0: the JSON start is the user's
        self._end_from_initial = self._end(begin, limit)
        return to_json_dict(self._end_from_initial)

    def _end(self, begin: PartitionOffsets, limit: ReadLimit) -> PartitionOffsets:
        # A partition of the start that this answer left out stays, at its start offset,
        # unless its deletion is confirmed: one answer saying "unknown" must not drop it.
        found, held = self._kafka.latest_since(begin)
        self._latest = found
        self._watch_lso(found)
        latest = {**found, **held}
        if LATEST in begin.values():
            # Step 2: pinning cannot wait for minOffsetsPerTrigger. Under AvailableNow "latest"
            # is the end fixed when the run began, so later records go to the next run.
            return pin_latest(begin, {**latest, **(self._target or {})})
        if self._target is not None:
            latest = available_now_end(begin, self._target, latest)
        if isinstance(limit, ReadAllAvailable):
            return latest
        delay = self._delay if self._target is None else None
        if delay is None and not isinstance(limit, ReadMaxRows):
            return latest
        # New partitions are read from their log start (partitions()): count them from there.
        origin = with_new_partitions(begin, self._earliest_of_new(begin, latest))
        if delay is not None and not delay.admit(sum(backlog(origin, latest).values())):
            return dict(begin)
        if isinstance(limit, ReadMaxRows):
            return rate_limit(origin, latest, limit.max_rows)
        return latest

    def _watch_lso(self, lso: PartitionOffsets) -> None:
        """Warn of an LSO pinned below the high watermark for longer than the broker's
        ``transaction.max.timeout.ms`` (a hanging transaction, hidden from Spark's progress,
        which reports the LSO); the high watermarks are asked at most every 10 s."""
        if self._options.isolation_level != "read_committed":
            return
        if self._pinned is None:
            self._pinned = PinnedLso(self._threshold_s)
        elif not self._pinned.due():
            return
        try:
            high = self._kafka.high_watermarks(key for key, offset in lso.items() if offset >= 0)
        except (KafkaSourceError, DeadlineExceeded) as exc:
            # A monitoring aid never fails the query (e.g. a topic deleted since the LSO).
            _log.info("kafka-eos source: pinned-LSO check skipped on this trigger: %s", exc)
            return
        for pinned in self._pinned.observe(lso, high):
            threshold_ms = round(self._pinned.threshold_s * 1000)
            _log.warning(pinned_warning(pinned, threshold_ms, self._options.bootstrap_servers))

    def _threshold_s(self) -> float:
        """The broker's ``transaction.max.timeout.ms`` in seconds, asked when first needed."""
        return self._kafka.transaction_max_timeout_ms() / 1000

    def _earliest_of_new(
        self, begin: PartitionOffsets, end: Mapping[PartitionKey, int]
    ) -> PartitionOffsets:
        """The log starts of the partitions of ``end`` that ``begin`` lacks (new since), asked
        of Kafka now; no request when there are none, as on almost every trigger."""
        new = [key for key in end if key not in begin]
        return self._kafka.list_offsets(dict.fromkeys(new, EARLIEST)) if new else {}

    def reportLatestOffset(self) -> dict | None:
        """The newest offsets seen, for ``StreamingQueryProgress`` (lag = latest - end).

        Under ``read_committed`` the LSO: Spark can carry only an offset JSON here, and it
        computes lag from it. A hanging transaction shows in the warning of
        :meth:`_watch_lso` instead."""
        return to_json_dict(self._latest) if self._latest is not None else None

    def partitions(self, start: dict, end: dict) -> list[KafkaInputPartition]:
        begin = from_json_dict(start, what="the batch start in Spark's offset log", symbolic=True)
        # A batch is planned: batch 0 was checked by the driver that logged its end.
        self._unnamed = None
        self._starts.planned(end)
        if LATEST in begin.values():
            return []  # Step 3: batch 0, which only pins the start
        stop = from_json_dict(end, what="the batch end in Spark's offset log")
        if begin == self._initial and stop != self._end_from_initial:
            # Batch 0 logged by an earlier driver: Spark passes the start this process
            # resolved again, which may name partitions added since. Replayed over the
            # partitions of its logged end only; batch 1 finds the new ones (from their log
            # starts).
            begin = {key: offset for key, offset in begin.items() if key in stop}
        # A new partition's start is its log start now, as in Spark: nothing in the offset log
        # records it. See "Partitions found after the start" in docs/source.md for replays.
        ranges, lost = plan_ranges(begin, stop, self._earliest_of_new(begin, stop))
        for detail in lost:
            report_data_loss(detail, fail=self._options.fail_on_data_loss)
        return self._tasks(ranges)

    def commit(self, end: dict) -> None:
        """For lag monitoring only, when ``kafka.group.id`` is set; recovery never reads it."""
        if self._options.group_id is not None:
            self._kafka.commit(from_json_dict(end, what="the committed batch end"))

    def stop(self) -> None:
        self._kafka.close()


def _partitions_to_start(kafka: KafkaOffsetReader, options: SourceOptions) -> list[PartitionKey]:
    """The partitions now; with ``assign`` they must all exist, or the start is not the
    user's (confirmed: one answer calling a partition unknown does not fail the query)."""
    keys = kafka.partitions_to_start()
    missing = set(options.subscription.partitions) - set(keys)
    if missing:
        raise SourceOptionError(
            "assign",
            ", ".join(describe(key) for key in sorted(missing)),
            "these partitions do not exist; create them or assign existing ones",
        )
    return keys
