"""What the linter reads: client configs, broker config, topics, timing and cluster facts.

Every part is optional. A part that is ``None`` is unknown and the rules needing it do not
fire; an empty broker mapping means "a broker on Apache Kafka defaults". Configs are flat
``str -> str`` mappings as written (either client's spelling); ``context`` resolves them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from connectors.policy.client_keys import DEFAULT_CLIENT, Client, merge_configs
from connectors.policy.errors import LintInputError


def config_value(value: object) -> str | None:
    """A config value as Kafka spells it (``true``/``false``, digits), ``None`` if not scalar.

    Client configs may carry callbacks (``error_cb``) next to values; those are not config.
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return str(value)
    return None


@dataclass(frozen=True)
class Timing:
    """Timing assumptions about the pipeline, in milliseconds, with documented defaults.

    The defaults describe a modest micro-batch job: a 10 s trigger, batches of at most a
    minute, a restart within 5 minutes, never restoring a checkpoint older than a day, and
    never running a day without committing a transaction (idle: no input, no batch).
    """

    trigger_interval_ms: int = 10_000
    max_batch_duration_ms: int = 60_000
    max_restart_time_ms: int = 300_000
    max_checkpoint_age_ms: int = 86_400_000
    max_idle_time_ms: int = 86_400_000

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if value < 0:
                raise LintInputError(f"timing {name}={value} must not be negative")

    @property
    def commit_window_ms(self) -> int:
        """Longest a transaction stays open: wait for the trigger, run the batch, restart."""
        return self.trigger_interval_ms + self.max_batch_duration_ms + self.max_restart_time_ms

    @property
    def max_pause_ms(self) -> int:
        """Longest a transactional id goes unused: idle, or stopped before a checkpoint restore."""
        return max(self.max_idle_time_ms, self.max_checkpoint_age_ms)


# Names used by pipeline files and CLI flags (``max_batch_duration`` / ``--max-batch-duration``).
TIMING_NAMES: Mapping[str, str] = {
    "trigger_interval": "trigger_interval_ms",
    "max_batch_duration": "max_batch_duration_ms",
    "max_restart_time": "max_restart_time_ms",
    "max_checkpoint_age": "max_checkpoint_age_ms",
    "max_idle_time": "max_idle_time_ms",
}


@dataclass(frozen=True)
class ConsumerInput:
    """A downstream consumer's config; ``client`` overrides the run's client for it."""

    name: str
    config: Mapping[str, str]
    client: Client | None = None


@dataclass(frozen=True)
class TopicFacts:
    """What is known of one topic: its replication factor and topic-level config."""

    replication_factor: int | None = None
    config: Mapping[str, str] = field(default_factory=dict)


# The coordinator's internal topic; EOS010 checks its replication.
TRANSACTION_STATE_TOPIC = "__transaction_state"


@dataclass(frozen=True)
class ClusterFacts:
    """Facts that have no default: how many brokers, the topics described, and the named
    topics a live cluster reported missing (rules report those instead of skipping them)."""

    broker_count: int | None = None
    topics: Mapping[str, TopicFacts] = field(default_factory=dict)
    missing_topics: frozenset[str] = frozenset()

    def overlaid(self, other: ClusterFacts) -> ClusterFacts:
        """``other`` on top of ``self``: known values win, topics merge per name, and a topic
        ``other`` reports missing is no longer described."""
        topics = {**self.topics, **other.topics}
        return ClusterFacts(
            broker_count=other.broker_count
            if other.broker_count is not None
            else self.broker_count,
            topics={n: f for n, f in topics.items() if n not in other.missing_topics},
            missing_topics=other.missing_topics | (self.missing_topics - other.topics.keys()),
        )


@dataclass(frozen=True)
class ClusterSnapshot:
    """What ``connectors.kafka.cluster_facts.read_cluster`` saw: one broker's config plus the
    cluster facts."""

    broker_config: Mapping[str, str]
    facts: ClusterFacts


@dataclass(frozen=True)
class LintInput:
    """Everything the rules may look at. Build it directly, from ``loaders``, or both.

    ``sink_options``/``source_options`` hold the Spark options that are not ``kafka.*``
    (``transactionalIdPrefix``, ``topic``, ``subscribe``...); the ``kafka.*`` ones are
    already folded into ``producer``/``consumer`` with the prefix removed, except the
    ones the kafka-eos source refuses, which stay source options so rules can report them.
    Spark option names are case-insensitive, so read them with ``sink_option``/``source_option``.

    ``kafka_eos_source``: ``consumer`` is the kafka-eos Spark source (a pipeline file's
    ``source:`` section), linted with the settings it forces (``connector_models.py``);
    otherwise it is any consumer, linted on its client's defaults. ``kafka_eos_sink``: the
    same for ``producer`` and the kafka-eos Spark sink (a ``sink:`` section), which chooses a
    transactional id and timeout when none is set.
    """

    client: Client = DEFAULT_CLIENT
    producer: Mapping[str, str] | None = None
    consumer: Mapping[str, str] | None = None
    downstream_consumers: tuple[ConsumerInput, ...] = ()
    broker: Mapping[str, str] | None = None
    sink_options: Mapping[str, str] = field(default_factory=dict)
    source_options: Mapping[str, str] = field(default_factory=dict)
    output_topics: tuple[str, ...] = ()
    source_topics: tuple[str, ...] = ()
    timing: Timing = field(default_factory=Timing)
    cluster: ClusterFacts = field(default_factory=ClusterFacts)
    rule_options: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    kafka_eos_source: bool = False
    kafka_eos_sink: bool = False

    def sink_option(self, name: str) -> str | None:
        """Spark sink option ``name``, matched case-insensitively as Spark does."""
        return _option(self.sink_options, name)

    def source_option(self, name: str) -> str | None:
        """Spark source option ``name``, matched case-insensitively as Spark does."""
        return _option(self.source_options, name)

    def output_topic_names(self) -> tuple[str, ...]:
        """Topics the sink writes: listed ones plus the Spark sink's ``topic`` option."""
        return _unique((*self.output_topics, self.sink_option("topic") or ""))

    def source_topic_names(self) -> tuple[str, ...]:
        """Topics the source reads: listed ones plus Spark ``subscribe`` and ``assign``."""
        subscribed = (self.source_option("subscribe") or "").split(",")
        return _unique(
            (*self.source_topics, *subscribed, *_assigned_topics(self.source_option("assign")))
        )

    def subscribes(self) -> bool:
        """Whether the source joins a consumer group (``subscribe``), not ``assign()``."""
        # The kafka-eos source assigns the partitions of a subscribe itself: no group.
        if self.kafka_eos_source or self.source_option("assign") is not None:
            return False
        if (
            self.source_option("subscribe") is not None
            or self.source_option("subscribePattern") is not None
        ):
            return True
        return self.consumer is not None and "group.id" in self.consumer

    def overlay(
        self,
        *,
        client: Client | None = None,
        producer: Mapping[str, str] | None = None,
        consumer: Mapping[str, str] | None = None,
        downstream_consumers: tuple[ConsumerInput, ...] = (),
        broker: Mapping[str, str] | None = None,
        output_topics: tuple[str, ...] = (),
        source_topics: tuple[str, ...] = (),
        timing_ms: Mapping[str, int] | None = None,
    ) -> LintInput:
        """This input with more specific sources on top (e.g. CLI files over a pipeline file)."""
        return replace(
            self,
            client=client or self.client,
            producer=merge_configs(self.producer, producer),
            consumer=merge_configs(self.consumer, consumer),
            downstream_consumers=self.downstream_consumers + downstream_consumers,
            broker=merge_configs(self.broker, broker),
            output_topics=self.output_topics + output_topics,
            source_topics=self.source_topics + source_topics,
            timing=replace(self.timing, **(timing_ms or {})),
        )

    def with_default_broker(self) -> LintInput:
        """Assume a broker on Apache Kafka defaults when no broker config was given."""
        return self if self.broker is not None else replace(self, broker={})

    def with_cluster(self, snapshot: ClusterSnapshot) -> LintInput:
        """Fold in what the live cluster reported; it wins over files, being the truth."""
        return replace(
            self,
            broker=merge_configs(self.broker, snapshot.broker_config),
            cluster=self.cluster.overlaid(snapshot.facts),
        )


def _unique(names: tuple[str, ...]) -> tuple[str, ...]:
    """Stripped, non-empty names in first-seen order."""
    return tuple(dict.fromkeys(n.strip() for n in names if n.strip()))


def _option(options: Mapping[str, str], name: str) -> str | None:
    wanted = name.lower()
    return next((value for key, value in options.items() if key.lower() == wanted), None)


def _assigned_topics(raw: str | None) -> tuple[str, ...]:
    """Topic names of a Spark ``assign`` option, ``{"topic": [0, 1]}``."""
    if not raw:
        return ()
    try:
        assignment = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise LintInputError(
            f'source option assign={raw!r} is not JSON; expected {{"topic": [0, 1]}}'
        ) from exc
    if not isinstance(assignment, dict):
        raise LintInputError(f'source option assign={raw!r}: expected {{"topic": [0, 1]}}')
    return tuple(str(topic) for topic in assignment)
