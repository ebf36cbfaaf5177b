"""The sink's options, validated in one place: :meth:`SinkOptions.parse`, the sink's one entry
point, as :meth:`SourceOptions.parse` is the source's; its errors are ``SinkOptionError``
(:mod:`connectors.kafka.sink.errors`).

Names follow Spark's built-in Kafka sink (``kafka.bootstrap.servers``, ``topic``, any other
``kafka.*`` key passed to the producer), plus what exactly-once needs; what it needs has a
default, so a job written for Spark's sink runs unchanged: the transactional-id prefix is
derived from the checkpoint location (:func:`connectors.kafka.sink.naming.derived_prefix`), and
the transaction timeout is chosen at startup (:mod:`connectors.kafka.sink.startup`). Spark
hands the options over lower-cased, so every name here is matched case-insensitively. Single
fields are checked where they are read, with the project's one option grammar
(:mod:`connectors.options`); so are the rules between options that parsing needs (a prefix
that is empty, a checkpoint location for exactly_once, a topic for a schema registry), and
those between producer settings are :meth:`SinkOptions._sanity_check`'s. What exactly-once
needs is held by :class:`ExactlyOnceOptions`, whose fields are all required: a sink with that
guarantee cannot be built without them.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from connectors.avro.options import AvroColumn, avro_columns
from connectors.kafka.client_check import checked_client_config
from connectors.kafka.client_config import kafka_python_config
from connectors.kafka.sink.errors import SinkOptionError
from connectors.kafka.sink.naming import derived_prefix
from connectors.kafka_keys import SINK, SPARK_KAFKA_OPTIONS
from connectors.options import OptionReader
from connectors.policy.inputs import Timing

_log = logging.getLogger(__name__)
_STABLE_PREFIX = re.compile(r"[A-Za-z0-9._-]+")
# Sink options that are durations (connectors.options grammar), and the Timing field of each.
_TIMING_OPTIONS = (
    ("triggerInterval", "trigger_interval_ms"),
    ("maxBatchDuration", "max_batch_duration_ms"),
    ("maxRestartTime", "max_restart_time_ms"),
)
_AVRO_OPTIONS = ("Format", "Schema", "SchemaFile", "WriterSchema", "WriterSchemaFile")
# The sink's own options; any other (not kafka.* or schema.registry.*) is unknown.
_OPTIONS = (
    "topic",
    "deliveryGuarantee",
    "transactionalIdPrefix",
    "checkpointLocation",
    *(option for option, _ in _TIMING_OPTIONS),
    "flushTimeoutMs",
    "commitTimeoutMs",
    *(f"{side}{name}" for side in ("key", "value") for name in _AVRO_OPTIONS),
)


class DeliveryGuarantee(StrEnum):
    EXACTLY_ONCE = "exactly_once"
    AT_LEAST_ONCE = "at_least_once"
    NONE = "none"


@dataclass(frozen=True)
class ExactlyOnceOptions:
    """What exactly-once needs: where the commit decisions live, and how the transactions are
    named. Only a sink with ``deliveryGuarantee`` exactly_once has them."""

    checkpoint_location: str
    transactional_id_prefix: str
    prefix_derived: bool = False  # no transactionalIdPrefix: derived from checkpoint_location

    @property
    def decision_location(self) -> str:
        return decision_location(self.checkpoint_location)


@dataclass(frozen=True)
class SinkOptions:
    bootstrap_servers: str
    topic: str | None
    guarantee: DeliveryGuarantee
    exactly_once: ExactlyOnceOptions | None = None
    producer_config: dict[str, Any] = field(default_factory=dict)
    timing: Timing = field(default_factory=Timing)
    flush_timeout_s: float = 120.0
    commit_timeout_s: float = 60.0
    avro: tuple[AvroColumn, ...] = ()  # key or value written as Avro (connectors.avro)

    def __post_init__(self) -> None:
        if (self.guarantee == DeliveryGuarantee.EXACTLY_ONCE) != (self.exactly_once is not None):
            raise ValueError(f"exactly_once options go with deliveryGuarantee exactly_once: {self}")
        self._sanity_check()

    @classmethod
    def parse(cls, options: Mapping[str, str], *, batch: bool = False) -> SinkOptions:
        """``batch``: the options of ``df.write`` rather than ``df.writeStream``."""
        read = OptionReader.of(options, SinkOptionError)
        read.check_names(_OPTIONS, tolerated=SPARK_KAFKA_OPTIONS, log=_log)
        producer = checked_client_config(read.options, SINK, "producer", SinkOptionError)
        bootstrap = read.required(
            "kafka.bootstrap.servers",
            ".option('kafka.bootstrap.servers', 'broker1:9092,broker2:9092')",
        )
        guarantee = DeliveryGuarantee(
            read.choice("deliveryGuarantee", [g.value for g in DeliveryGuarantee])
        )
        timing = Timing(
            **{
                name: read.duration_ms(option, "")
                for option, name in _TIMING_OPTIONS
                if option in read
            }
        )
        prefix = read.get("transactionalIdPrefix")
        if prefix is not None and not prefix.strip():
            # A mistake (an unset variable), whatever the guarantee: not a request for the default.
            raise SinkOptionError(
                "transactionalIdPrefix",
                prefix,
                "it is empty: remove the option to derive a prefix from the checkpoint location, "
                "or give one",
            )
        exactly_once = None
        if guarantee == DeliveryGuarantee.EXACTLY_ONCE:
            exactly_once = _exactly_once(read, prefix, batch)
        avro = avro_columns(read, SinkOptionError, source=False)
        topic = read.get("topic") or None
        if topic is None and any(column.registry is not None for column in avro):
            raise SinkOptionError(
                "topic",
                None,
                "schema.registry.url needs the topic option: the schema's subject is "
                "<topic>-value (or -key), Confluent's TopicNameStrategy",
            )
        return cls(
            bootstrap_servers=bootstrap,
            topic=topic,
            guarantee=guarantee,
            exactly_once=exactly_once,
            producer_config=producer,
            timing=timing,
            flush_timeout_s=_millis(read, "flushTimeoutMs", 120_000) / 1000,
            commit_timeout_s=_millis(read, "commitTimeoutMs", 60_000) / 1000,
            avro=avro,
        )

    def _sanity_check(self) -> None:
        if self.exactly_once is None:
            return
        # The driver's transaction admin must be able to log in with the same credentials.
        kafka_python_config(self.producer_config)
        idempotence = str(self.producer_config.get("enable.idempotence", "true"))
        if idempotence.lower() == "false":
            raise SinkOptionError(
                "kafka.enable.idempotence",
                idempotence,
                "it contradicts deliveryGuarantee exactly_once (transactions need the "
                "idempotent producer): remove it",
            )


def _exactly_once(read: OptionReader, prefix: str | None, batch: bool) -> ExactlyOnceOptions:
    """The checkpoint location is required; the prefix is derived from it when not given."""
    checkpoint_location = read.get("checkpointLocation") or None
    if checkpoint_location is None and batch:
        raise SinkOptionError(
            "checkpointLocation",
            None,
            "deliveryGuarantee exactly_once needs a location for a batch write too, one per "
            "write: the sink keeps the write's commit decision there, so that a rerun after a "
            "driver crash finishes the commits of a decided write and writes nothing again: "
            ".write.option('checkpointLocation', '<path or URI>'). Or set deliveryGuarantee "
            "at_least_once, as Spark's own sink (a failed job may leave rows visible, and its "
            "rerun writes them again)",
        )
    if checkpoint_location is None:
        raise SinkOptionError(
            "checkpointLocation",
            None,
            "deliveryGuarantee exactly_once needs the query's checkpoint location as an option "
            "of the writer, where the sink keeps its commit decisions: "
            ".writeStream.option('checkpointLocation', '<path or URI>'). The session setting "
            "spark.sql.streaming.checkpointLocation is not visible to Python sinks",
        )
    if prefix is None:
        return ExactlyOnceOptions(checkpoint_location, derived_prefix(checkpoint_location), True)
    if not _STABLE_PREFIX.fullmatch(prefix):
        raise SinkOptionError(
            "transactionalIdPrefix", prefix, "it may only hold letters, digits, '.', '_' and '-'"
        )
    return ExactlyOnceOptions(checkpoint_location, prefix)


def decision_location(checkpoint_location: str) -> str:
    """Where the sink keeps its commit decisions: inside the query's checkpoint, so they share
    its lifetime (deleting the checkpoint resets both). ``kafka-eos txn abort`` reads them."""
    return f"{checkpoint_location.rstrip('/')}/kafka-eos-sink"


def _millis(read: OptionReader, name: str, default: int) -> int:
    value = read.positive_int(name, example=str(default))
    return default if value is None else value
