"""The sink's options, validated in one place.

Names follow Spark's built-in Kafka sink (``kafka.bootstrap.servers``, ``topic``, any other
``kafka.*`` key passed to the producer), plus what exactly-once needs; what it needs has a
default, so a job written for Spark's sink runs unchanged: the transactional-id prefix is
derived from the checkpoint location (:func:`connectors.kafka.sink.naming.derived_prefix`), and the
transaction timeout comes from the brokers at startup (``connectors.spark.sink``). Spark
hands the options over lower-cased, so every name here is matched case-insensitively. Single
fields are checked where they are read; the cross-field rules are in
:meth:`SinkOptions._sanity_check`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from checkpoint.errors import ConfigError
from connectors.kafka.client_config import kafka_python_config
from connectors.kafka.sink.naming import derived_prefix
from connectors.policy.inputs import Timing, parse_duration

# Keys Spark's Kafka sink rejects too, or that the guarantee depends on and the sink sets.
_REJECTED_KAFKA_KEYS: Mapping[str, str] = {
    "transactional.id": "the sink names transactions itself: set 'transactionalIdPrefix'",
    "key.serializer": "keys are written as bytes: cast the 'key' column to string or binary",
    "value.serializer": "values are written as bytes: cast the 'value' column to string or binary",
}
_STABLE_PREFIX = re.compile(r"[A-Za-z0-9._-]+")


class DeliveryGuarantee(StrEnum):
    EXACTLY_ONCE = "exactly_once"
    AT_LEAST_ONCE = "at_least_once"
    NONE = "none"


@dataclass(frozen=True)
class SinkOptions:
    bootstrap_servers: str
    topic: str | None
    guarantee: DeliveryGuarantee
    transactional_id_prefix: str | None
    checkpoint_location: str | None
    prefix_derived: bool = False  # no transactionalIdPrefix: derived from checkpoint_location
    producer_config: dict[str, Any] = field(default_factory=dict)
    timing: Timing = field(default_factory=Timing)
    flush_timeout_s: float = 120.0
    commit_timeout_s: float = 60.0

    def __post_init__(self) -> None:
        self._sanity_check()

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SinkOptions:
        lowered = {k.lower(): v for k, v in options.items()}
        producer = {k[len("kafka.") :]: v for k, v in lowered.items() if k.startswith("kafka.")}
        for key, why in _REJECTED_KAFKA_KEYS.items():
            if key in producer:
                raise ConfigError(
                    f"option 'kafka.{key}' = {producer[key]!r} is not supported: {why}"
                )
        bootstrap = producer.get("bootstrap.servers")
        if not bootstrap:
            raise ConfigError(
                "option 'kafka.bootstrap.servers' is required, e.g. "
                ".option('kafka.bootstrap.servers', 'broker1:9092,broker2:9092')"
            )
        raw_guarantee = lowered.get("deliveryguarantee", DeliveryGuarantee.EXACTLY_ONCE.value)
        try:
            guarantee = DeliveryGuarantee(raw_guarantee.lower())
        except ValueError:
            raise ConfigError(
                f"option 'deliveryGuarantee' = {raw_guarantee!r} is not one of "
                f"{[g.value for g in DeliveryGuarantee]}"
            ) from None
        timing = Timing(
            **{
                name: parse_duration(lowered[option.lower()], what=f"option '{option}'")
                for option, name in (
                    ("triggerInterval", "trigger_interval_ms"),
                    ("maxBatchDuration", "max_batch_duration_ms"),
                    ("maxRestartTime", "max_restart_time_ms"),
                )
                if option.lower() in lowered
            }
        )
        checkpoint_location = lowered.get("checkpointlocation") or None
        prefix = lowered.get("transactionalidprefix")
        if prefix is not None and not prefix.strip():
            raise ConfigError(
                f"option 'transactionalIdPrefix' = {prefix!r} is empty: remove the option to "
                "derive a prefix from the checkpoint location, or give one"
            )
        derived = False
        exactly_once = guarantee == DeliveryGuarantee.EXACTLY_ONCE
        if prefix is None and checkpoint_location is not None and exactly_once:
            prefix, derived = derived_prefix(checkpoint_location), True
        return cls(
            bootstrap_servers=bootstrap,
            topic=lowered.get("topic") or None,
            guarantee=guarantee,
            transactional_id_prefix=prefix,
            checkpoint_location=checkpoint_location,
            prefix_derived=derived,
            producer_config=producer,
            timing=timing,
            flush_timeout_s=_millis(lowered, "flushTimeoutMs", 120_000) / 1000,
            commit_timeout_s=_millis(lowered, "commitTimeoutMs", 60_000) / 1000,
        )

    def _sanity_check(self) -> None:
        if self.guarantee != DeliveryGuarantee.EXACTLY_ONCE:
            return
        if not self.checkpoint_location:
            raise ConfigError(
                "deliveryGuarantee 'exactly_once' needs the query's checkpoint location as an "
                "option of the writer, where the sink keeps its commit decisions: "
                ".writeStream.option('checkpointLocation', '<path or URI>'). The session "
                "setting spark.sql.streaming.checkpointLocation is not visible to Python sinks."
            )
        prefix = self.transactional_id_prefix
        if prefix is None or not _STABLE_PREFIX.fullmatch(prefix):
            raise ConfigError(
                f"option 'transactionalIdPrefix' = {prefix!r} may only hold letters, digits, "
                "'.', '_' and '-'"
            )
        # The driver's transaction admin must be able to log in with the same credentials.
        kafka_python_config(self.producer_config)
        if str(self.producer_config.get("enable.idempotence", "true")).lower() == "false":
            raise ConfigError(
                "option 'kafka.enable.idempotence' = 'false' contradicts deliveryGuarantee "
                "'exactly_once' (transactions need the idempotent producer): remove it"
            )

    @property
    def decision_location(self) -> str:
        assert self.checkpoint_location is not None
        return decision_location(self.checkpoint_location)


def decision_location(checkpoint_location: str) -> str:
    """Where the sink keeps its commit decisions: inside the query's checkpoint, so they share
    its lifetime (deleting the checkpoint resets both). ``kafka-eos txn abort`` reads them."""
    return f"{checkpoint_location.rstrip('/')}/kafka-eos-sink"


def _millis(lowered: Mapping[str, str], key: str, default: int) -> int:
    """``key`` as documented (it names the option in errors), looked up lower-cased."""
    raw = lowered.get(key.lower())
    if raw is None:
        return default
    if not raw.isdigit() or int(raw) <= 0:
        raise ConfigError(f"option '{key}' = {raw!r} must be a positive number of milliseconds")
    return int(raw)
