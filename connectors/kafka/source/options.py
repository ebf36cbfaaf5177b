"""The source's options, validated in one place: Spark's built-in Kafka source names and meanings.

Single options are checked where they are read, with the project's one option grammar
(:mod:`connectors.options`); the rules between options live in :func:`_sanity_check`. Every
error names the option, the value seen and the fix. Option names are case-insensitive, as in
Spark (which hands them over lower-cased).

>>> opts = SourceOptions.parse({"kafka.bootstrap.servers": "k:9092", "subscribe": "orders"},
...                            streaming=True)
>>> opts.starting.side, opts.starting.kind, opts.isolation_level
(<BoundSide.START: 'start'>, <BoundKind.LATEST: 'latest'>, 'read_committed')
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from connectors.avro.options import AvroColumn, avro_columns
from connectors.kafka.client_check import checked_client_config
from connectors.kafka.source.errors import SourceOptionError
from connectors.kafka.source.offsets import (
    EARLIEST,
    LATEST,
    PartitionKey,
    PartitionOffsets,
    describe,
    parse_assign,
    parse_offsets_option,
)
from connectors.kafka_keys import SOURCE, SPARK_KAFKA_OPTIONS
from connectors.options import OptionReader, is_digits, near_miss

_log = logging.getLogger(__name__)

_AVRO_OPTIONS = ("Format", "Schema", "SchemaFile", "WriterSchema", "WriterSchemaFile")
# The source's own options; anything else not ``kafka.*`` is unknown.
_OPTIONS = frozenset(
    name
    for name in [
        "subscribe",
        "subscribePattern",
        "assign",
        "startingOffsets",
        "startingOffsetsByTimestamp",
        "startingTimestamp",
        "startingOffsetsByTimestampStrategy",
        "endingOffsets",
        "endingOffsetsByTimestamp",
        "endingTimestamp",
        "maxOffsetsPerTrigger",
        "minOffsetsPerTrigger",
        "maxTriggerDelay",
        "minPartitions",
        "maxRecordsPerPartition",
        "failOnDataLoss",
        "includeHeaders",
        "groupIdPrefix",
        "kafkaConsumer.pollTimeoutMs",
        "fetchOffset.numRetries",
        "fetchOffset.retryIntervalMs",
        # Avro (connectors.avro.options), plus any schema.registry.* key.
        *(f"{side}{name}" for side in ("key", "value") for name in _AVRO_OPTIONS),
        "mode",
    ]
)


class SubscriptionKind(StrEnum):
    """How the topic-partitions are chosen; each value is the name of its option."""

    SUBSCRIBE = "subscribe"
    SUBSCRIBE_PATTERN = "subscribePattern"
    ASSIGN = "assign"


@dataclass(frozen=True)
class Subscription:
    """Which topic-partitions to read: exactly one of ``subscribe``, ``subscribePattern``,
    ``assign``."""

    kind: SubscriptionKind
    topics: tuple[str, ...] = ()
    pattern: str = ""
    partitions: tuple[PartitionKey, ...] = ()

    def matches(self, topic: str) -> bool:
        """Whether a topic belongs to a ``subscribe`` or ``subscribePattern`` subscription.

        Java's ``Pattern.matcher().matches()`` is a full match, hence ``fullmatch``.
        """
        if self.kind == SubscriptionKind.SUBSCRIBE:
            return topic in self.topics
        return re.fullmatch(self.pattern, topic) is not None


class BoundSide(StrEnum):
    """Whether a bound is where a read starts (``starting*`` options) or ends (``ending*``)."""

    START = "start"
    END = "end"


class BoundKind(StrEnum):
    """How a bound is given; Spark's ``KafkaOffsetRangeLimit`` cases are
    ``EarliestOffsetRangeLimit``, ``LatestOffsetRangeLimit``, ``SpecificOffsetRangeLimit``
    (JSON offsets), ``SpecificTimestampRangeLimit`` (JSON timestamps, one per partition) and
    ``GlobalTimestampRangeLimit`` (one timestamp for every partition)."""

    EARLIEST = "earliest"
    LATEST = "latest"
    OFFSETS = "offsets"
    TIMESTAMPS = "timestamps"
    TIMESTAMP = "timestamp"

    @property
    def per_partition(self) -> bool:
        """Whether the bound names its partitions (JSON offsets or timestamps), and so must
        name exactly the partitions being read."""
        return self in (BoundKind.OFFSETS, BoundKind.TIMESTAMPS)

    @property
    def by_timestamp(self) -> bool:
        """Whether the bound is a timestamp, per partition or for every partition."""
        return self in (BoundKind.TIMESTAMPS, BoundKind.TIMESTAMP)


@dataclass(frozen=True)
class OffsetBound:
    """Where a read starts or ends, as given; resolved against Kafka on the driver.

    ``option`` is the option it comes from (for error messages), ``side`` whether it starts
    or ends the read. ``offsets`` holds offsets (with -2 earliest, -1 latest) for kind
    ``OFFSETS``, and timestamps in ms for kind ``TIMESTAMPS``; ``timestamp`` is the one of
    kind ``TIMESTAMP``.
    """

    option: str
    side: BoundSide
    kind: BoundKind
    offsets: PartitionOffsets = field(default_factory=dict)
    timestamp: int = 0


@dataclass(frozen=True)
class AvroReading:
    """The Avro columns and the ``mode`` for malformed values (FAILFAST, the default, or
    PERMISSIVE: null, with the bytes in ``_corrupt_<column>``)."""

    columns: tuple[AvroColumn, ...]
    permissive: bool
    topic: str | None  # the one topic read, whose subject gives a schema not given


@dataclass(frozen=True)
class SourceOptions:
    """Everything the driver and the executors need; small and picklable."""

    bootstrap_servers: str
    subscription: Subscription
    starting: OffsetBound
    ending: OffsetBound
    timestamp_strategy: str = "error"  # or "latest": when no offset matches a timestamp
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_s: float = 900.0
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    group_id: str | None = None
    group_id_prefix: str = "spark-kafka-source"
    isolation_level: str = "read_committed"
    poll_timeout_s: float = 120.0
    api_timeout_s: float = 60.0
    client_config: dict[str, str] = field(default_factory=dict)  # librdkafka keys
    avro: AvroReading | None = None  # key or value read as Avro

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
        """Validate the user's options for a streaming (``readStream``) or batch (``read``)
        query: the source's one entry point, as :meth:`SinkOptions.parse` is the sink's."""
        read = OptionReader.of(options, SourceOptionError)
        opts = read.options
        client = checked_client_config(opts, SOURCE, "consumer", SourceOptionError)
        read.check_names(_OPTIONS, tolerated=SPARK_KAFKA_OPTIONS, log=_log)
        parsed = cls(
            bootstrap_servers=read.required("kafka.bootstrap.servers", "host1:9092,host2:9092"),
            subscription=_subscription(opts),
            starting=_starting(opts, streaming),
            ending=_ending(opts, streaming),
            timestamp_strategy=read.choice(
                "startingOffsetsByTimestampStrategy", ("error", "latest")
            ),
            max_offsets_per_trigger=read.positive_int("maxOffsetsPerTrigger"),
            min_offsets_per_trigger=read.positive_int("minOffsetsPerTrigger"),
            max_trigger_delay_s=read.duration_ms("maxTriggerDelay", "15m") / 1000,
            min_partitions=read.positive_int("minPartitions"),
            max_records_per_partition=read.positive_int("maxRecordsPerPartition"),
            fail_on_data_loss=read.boolean("failOnDataLoss", True),
            include_headers=read.boolean("includeHeaders", False),
            group_id=opts.get("kafka.group.id"),
            group_id_prefix=opts.get("groupidprefix", "spark-kafka-source"),
            isolation_level=read.choice(
                "kafka.isolation.level", ("read_committed", "read_uncommitted")
            ),
            poll_timeout_s=(read.positive_int("kafkaConsumer.pollTimeoutMs") or 120_000) / 1000,
            api_timeout_s=(read.positive_int("kafka.default.api.timeout.ms") or 60_000) / 1000,
            client_config=client,
            avro=_avro(read),
        )
        _sanity_check(parsed, opts)
        _check_unused_retry_options(read)
        return parsed


def parse_avro(options: Mapping[str, str]) -> AvroReading | None:
    """The Avro part of the options alone: ``DataSource.schema()`` needs it before Spark says
    whether the query streams."""
    return _avro(OptionReader.of(options, SourceOptionError))


def _avro(read: OptionReader) -> AvroReading | None:
    columns = avro_columns(read, SourceOptionError, source=True)
    if not columns:
        return None
    subscription = _subscription(read.options)
    topics = (
        subscription.topics
        if subscription.kind == SubscriptionKind.SUBSCRIBE
        else tuple(sorted({topic for topic, _ in subscription.partitions}))
    )
    return AvroReading(
        columns,
        permissive=read.choice("mode", ("failfast", "permissive")) == "permissive",
        topic=topics[0] if len(topics) == 1 else None,
    )


def _sanity_check(parsed: SourceOptions, opts: Mapping[str, str]) -> None:
    """Rules between options: contradictions fail, Spark's silent precedences are logged."""
    low, high = parsed.min_offsets_per_trigger, parsed.max_offsets_per_trigger
    if low is not None and high is not None and low > high:
        raise SourceOptionError(
            "minOffsetsPerTrigger",
            str(low),
            f"it is above maxOffsetsPerTrigger={high}; no batch could satisfy both. Lower "
            "minOffsetsPerTrigger or raise maxOffsetsPerTrigger",
        )
    if parsed.group_id is not None and "groupidprefix" in opts:
        _log.warning("kafka-eos source: groupIdPrefix is ignored because kafka.group.id is set")
    given = [n for n in ("startingtimestamp", "startingoffsetsbytimestamp") if n in opts]
    if len(given) > 1 or (given and "startingoffsets" in opts):
        _log.warning(
            "kafka-eos source: %s wins over the other starting options (Spark's precedence: "
            "startingTimestamp, startingOffsetsByTimestamp, startingOffsets)",
            parsed.starting.option,
        )


def _check_unused_retry_options(read: OptionReader) -> None:
    """Spark's ``fetchOffset.numRetries`` and ``fetchOffset.retryIntervalMs``: checked as Spark
    reads them (a whole number of attempts, milliseconds), so a job that runs on Spark runs
    here and a typo fails, and deliberately not used.

    Spark counts attempts of a Java call that retries by itself for up to
    ``default.api.timeout.ms``; each attempt here is one request, retried with backoff until
    ``kafka.default.api.timeout.ms``. Counting them would give up within seconds of a leader
    election that Spark's three attempts ride out.
    """
    given = [
        name for name in ("fetchOffset.numRetries", "fetchOffset.retryIntervalMs") if name in read
    ]
    if not given:
        return
    read.positive_int("fetchOffset.numRetries", example="3")
    read.duration_ms("fetchOffset.retryIntervalMs", "1000")
    _log.info(
        "kafka-eos source: %s accepted and not used: offset lookups retry transient errors "
        "until kafka.default.api.timeout.ms (docs/source.md)",
        ", ".join(given),
    )


def _subscription(opts: Mapping[str, str]) -> Subscription:
    names = ("subscribe", "subscribePattern", "assign")
    given = [name for name in names if name.lower() in opts]
    if len(given) != 1:
        raise SourceOptionError(
            " / ".join(given or names),
            ", ".join(opts[name.lower()] for name in given) if given else None,
            f"{'several are set' if given else 'none is set'}; set exactly one of subscribe "
            "(comma-separated topics), subscribePattern (a regular expression) or assign "
            '(JSON, e.g. {"orders":[0,1]})',
        )
    kind, value = given[0], opts[given[0].lower()]
    if kind == "assign":
        return Subscription(SubscriptionKind.ASSIGN, partitions=parse_assign(value))
    if kind == "subscribePattern":
        try:
            re.compile(value)
        except re.error as exc:
            raise SourceOptionError(kind, value, f"not a regular expression: {exc}") from exc
        return Subscription(SubscriptionKind.SUBSCRIBE_PATTERN, pattern=value)
    topics = tuple(sorted({t.strip() for t in value.split(",") if t.strip()}))
    if not topics:
        raise SourceOptionError(kind, value, "give one or more topics, e.g. orders,payments")
    return Subscription(SubscriptionKind.SUBSCRIBE, topics=topics)


def _starting(opts: Mapping[str, str], streaming: bool) -> OffsetBound:
    """Spark's precedence: startingTimestamp, then startingOffsetsByTimestamp, then
    startingOffsets (default latest when streaming, earliest in a batch query)."""
    if "startingtimestamp" in opts:
        return _timestamp(opts, "startingTimestamp", BoundSide.START)
    if "startingoffsetsbytimestamp" in opts:
        return _by_timestamp(opts, "startingOffsetsByTimestamp", BoundSide.START)
    default = "latest" if streaming else "earliest"
    # A batch query cannot start at "latest": it would read nothing.
    allowed = {EARLIEST, LATEST} if streaming else {EARLIEST}
    return _offsets_bound(opts, "startingOffsets", BoundSide.START, default, allowed)


def _ending(opts: Mapping[str, str], streaming: bool) -> OffsetBound:
    names = ("endingOffsets", "endingOffsetsByTimestamp", "endingTimestamp")
    if streaming:
        for name in names:
            if name.lower() in opts:
                raise SourceOptionError(
                    name,
                    opts[name.lower()],
                    "ending offsets are for batch queries (spark.read); a streaming query runs "
                    "until stopped. Use trigger(availableNow=True) to stop at the data "
                    "available when the query starts",
                )
        return OffsetBound("endingOffsets", BoundSide.END, BoundKind.LATEST)
    if "endingtimestamp" in opts:
        return _timestamp(opts, "endingTimestamp", BoundSide.END)
    if "endingoffsetsbytimestamp" in opts:
        return _by_timestamp(opts, "endingOffsetsByTimestamp", BoundSide.END)
    # Ending at "earliest" would read nothing.
    return _offsets_bound(opts, "endingOffsets", BoundSide.END, "latest", {LATEST})


def _offsets_bound(
    opts: Mapping[str, str], name: str, side: BoundSide, default: str, allowed: set[int]
) -> OffsetBound:
    value = opts.get(name.lower(), default).strip()
    words = {"earliest": EARLIEST, "latest": LATEST}
    choices = " or ".join(w for w, special in words.items() if special in allowed)
    if value.lower() in words:
        if words[value.lower()] not in allowed:
            raise SourceOptionError(name, value, f"use {choices} or JSON offsets in a batch query")
        return OffsetBound(name, side, BoundKind(value.lower()))
    guess = near_miss(value, words) if not value.startswith("{") else None
    if guess is not None:
        raise SourceOptionError(name, value, f"did you mean {guess}? Or give JSON offsets")
    specials = " / ".join(f"{s} ({w})" for w, s in words.items() if s in allowed)
    example = '{"orders":{"0":23,"1":' + str(max(allowed)) + "}}"
    offsets = parse_offsets_option(
        name, value, allowed=f"an offset >= 0 or {specials}", example=example
    )
    for key, offset in offsets.items():
        if offset < 0 and offset not in allowed:
            raise SourceOptionError(
                name, value, f"offset {offset} of {describe(key)} must be >= 0 or {specials}"
            )
    return OffsetBound(name, side, BoundKind.OFFSETS, offsets=offsets)


def _by_timestamp(opts: Mapping[str, str], name: str, side: BoundSide) -> OffsetBound:
    value = opts[name.lower()]
    example = '{"orders":{"0":1700000000000,"1":1700000000000}}'
    stamps = parse_offsets_option(name, value, allowed="a timestamp in ms", example=example)
    if any(stamp < 0 for stamp in stamps.values()):
        raise SourceOptionError(name, value, "timestamps are milliseconds since the epoch, >= 0")
    return OffsetBound(name, side, BoundKind.TIMESTAMPS, offsets=stamps)


def _timestamp(opts: Mapping[str, str], name: str, side: BoundSide) -> OffsetBound:
    """``startingTimestamp`` / ``endingTimestamp``: one timestamp for every partition."""
    value = opts[name.lower()]
    if not is_digits(value.strip()):
        raise SourceOptionError(
            name, value, "expected milliseconds since the epoch, e.g. 1700000000000"
        )
    return OffsetBound(name, side, BoundKind.TIMESTAMP, timestamp=int(value))
