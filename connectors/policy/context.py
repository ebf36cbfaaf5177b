"""Resolved views of a ``LintInput`` that rules read: every value with where it came from.

A rule asks ``ctx.producer.get("transaction.timeout.ms")`` and gets a ``Setting``: the
value the code running the client forces (the kafka-eos source), else the value as
written, else the value the client derives (librdkafka sets ``message.timeout.ms`` to
``transaction.timeout.ms`` in transactional mode), else the client's default. Messages
print the origin, so a finding about a default says so.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

from connectors.kafka_keys import SOURCE
from connectors.options import format_duration
from connectors.policy.client_keys import (
    Client,
    Role,
    client_default,
    find_key,
    ignored_key,
    native_name,
)
from connectors.policy.connector_models import SOURCE_CLIENT, SOURCE_NAME
from connectors.policy.errors import LintInputError
from connectors.policy.inputs import LintInput, Timing, TopicFacts
from connectors.transaction_timeout import CHOSEN_NOTE, default_transaction_timeout_ms

# Apache Kafka broker defaults (4.x), used when the broker config leaves a key unset.
BROKER_DEFAULTS: Mapping[str, str] = {
    "transaction.max.timeout.ms": "900000",
    "transactional.id.expiration.ms": "604800000",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "min.insync.replicas": "1",
    "unclean.leader.election.enable": "false",
    "log.retention.hours": "168",
}
# Broker retention keys, most specific first, with their unit in ms.
_RETENTION_KEYS: tuple[tuple[str, int], ...] = (
    ("log.retention.ms", 1),
    ("log.retention.minutes", 60_000),
    ("log.retention.hours", 3_600_000),
)
# Topic-level key -> the broker key that supplies its default.
_TOPIC_TO_BROKER: Mapping[str, str] = {
    "min.insync.replicas": "min.insync.replicas",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
}


@dataclass(frozen=True)
class Setting:
    """One value a rule looked at; ``note`` says why it has this value when it was not set."""

    where: str
    key: str
    value: str
    note: str = ""

    def number(self) -> float:
        """The value as a number; a non-number is an input error naming key and value."""
        try:
            return float(self.value)
        except ValueError:
            raise LintInputError(f"{self} is not a number") from None

    def flag(self) -> bool:
        """The value as a Kafka boolean."""
        return self.value.strip().lower() == "true"

    def ms(self) -> int:
        """The value as whole milliseconds."""
        return int(self.number())

    def timed(self) -> str:
        """Like ``str()`` with the value also as a duration: ``...=3600000 (1h, note)``."""
        return self._render(format_duration(self.ms()))

    def __str__(self) -> str:
        return self._render()

    def _render(self, *extra: str) -> str:
        notes = ", ".join(filter(None, (*extra, self.note)))
        suffix = f" ({notes})" if notes else ""
        return f"{self.where} {self.key}={self.value}{suffix}".lstrip()


@dataclass(frozen=True)
class ClientView:
    """A producer or consumer config as the given client will actually run it.

    ``forced`` holds values the code owning the client sets whatever the config says
    (``forced_by`` names it): the kafka-eos source's ``enable.auto.commit=false``. ``chosen``
    holds the values it sets when the config is silent: the kafka-eos sink's timeout.
    """

    role: Role
    label: str
    client: Client
    config: Mapping[str, str]
    forced: Mapping[str, str] = field(default_factory=dict)
    forced_by: str = ""
    chosen: Mapping[str, Setting] = field(default_factory=dict)  # when the config is silent

    def name(self, key: str) -> str:
        """``key`` as the user wrote it, else as ``client``'s documentation spells it."""
        return find_key(self.config, key, self.client) or native_name(key, self.client)

    def explicit(self, key: str) -> Setting | None:
        """The value set for canonical ``key`` under a spelling ``client`` reads, or ``None``."""
        written = find_key(self.config, key, self.client)
        return None if written is None else Setting(self.label, written, self.config[written])

    def get(self, key: str) -> Setting:
        """The effective value: forced, else set, else derived by the client, else the
        client default."""
        return (
            self._forced(key)
            or self.explicit(key)
            or self.chosen.get(key)
            or self._derived(key)
            or self._default(key)
        )

    def _forced(self, key: str) -> Setting | None:
        if key not in self.forced:
            return None
        return Setting(self.label, self.name(key), self.forced[key], f"forced by {self.forced_by}")

    def _default(self, key: str) -> Setting:
        value = client_default(self.role, key, self.client)
        if value is None:
            raise KeyError(f"no {self.client} {self.role} default for {key}")
        note = f"{self.client} default"
        # "delivery.timeout.ms=120000 (java default)" next to a message.timeout.ms the user
        # wrote would look like a linter bug; say the client ignores that spelling.
        ignored = ignored_key(self.config, key, self.client)
        if ignored is not None:
            note += f"; {ignored} is librdkafka's name, which {self.client} ignores"
        return Setting(self.label, self.name(key), value, note)

    def _derived(self, key: str) -> Setting | None:
        """Values the client computes itself. The producer is linted as the transactional
        producer it must be (EOS008 reports a missing ``transactional.id``)."""
        if self.role != "producer":
            return None
        if self.client == "librdkafka":
            return self._librdkafka_derived(key)
        if key == "delivery.timeout.ms":
            floor = self.get("linger.ms").number() + self.get("request.timeout.ms").number()
            if floor > float(client_default("producer", key, "java") or 0):
                note = "Java raises it to linger.ms + request.timeout.ms"
                return Setting(self.label, self.name(key), str(int(floor)), note)
        return None

    def _librdkafka_derived(self, key: str) -> Setting | None:
        """What ``rd_kafka_conf_finalize`` does to a transactional producer's unset keys."""
        name = self.name(key)
        if key == "enable.idempotence":
            return Setting(self.label, name, "true", "librdkafka enables it for transactional.id")
        if key == "max.in.flight.requests.per.connection":
            return Setting(self.label, name, "5", "librdkafka caps it at 5 when idempotent")
        if key == "delivery.timeout.ms":
            txn = self.get("transaction.timeout.ms")
            return Setting(
                self.label, name, txn.value, "librdkafka sets it to transaction.timeout.ms"
            )
        if key == "socket.timeout.ms":
            txn_ms = int(self.get("transaction.timeout.ms").number())
            note = "librdkafka sets it to transaction.timeout.ms - 100"
            return Setting(self.label, name, str(max(txn_ms - 100, 900)), note)
        return None


@dataclass(frozen=True)
class BrokerView:
    """Broker config with Apache Kafka defaults for unset keys."""

    config: Mapping[str, str]

    def get(self, key: str) -> Setting:
        if key in self.config:
            return Setting("broker", key, self.config[key])
        return Setting("broker", key, BROKER_DEFAULTS[key], "Apache Kafka default")

    def retention_ms(self) -> Setting:
        """Default topic retention: ``log.retention.ms``, else minutes, else hours."""
        for key, unit in _RETENTION_KEYS:
            if key in self.config:
                value = self.get(key)
                return value if unit == 1 else _scaled(value, unit)
        return _scaled(self.get("log.retention.hours"), 3_600_000)


def _scaled(setting: Setting, unit_ms: int) -> Setting:
    """``log.retention.hours=168`` seen as milliseconds, naming where it came from."""
    note = ", ".join(filter(None, (setting.note, f"{setting.key}={setting.value}")))
    value = str(int(setting.number() * unit_ms))
    return Setting(setting.where, "log.retention.ms", value, note)


@dataclass(frozen=True)
class TopicView:
    """A described topic; topic-level keys fall back to the broker's defaults."""

    name: str
    facts: TopicFacts
    broker: BrokerView

    def get(self, key: str) -> Setting:
        """Topic config ``key``, inherited from the broker when the topic does not set it."""
        where = f"topic {self.name}"
        if key in self.facts.config:
            return Setting(where, key, self.facts.config[key])
        if key == "retention.ms":
            inherited = self.broker.retention_ms()
        else:
            inherited = self.broker.get(_TOPIC_TO_BROKER[key])
        note = ", ".join(filter(None, ("inherited from broker", inherited.note)))
        return Setting(where, key, inherited.value, note)


@dataclass(frozen=True)
class LintContext:
    """What a rule's ``check`` receives. Parts that are ``None`` were not given."""

    input: LintInput
    producer: ClientView | None
    source: ClientView | None
    downstream: tuple[ClientView, ...]
    broker: BrokerView | None

    @classmethod
    def from_input(cls, lint_input: LintInput) -> LintContext:
        client = lint_input.client
        return cls(
            input=lint_input,
            producer=_producer_view(lint_input),
            source=_source_view(lint_input),
            downstream=tuple(
                ClientView(
                    "consumer", f"downstream consumer {c.name}", c.client or client, c.config
                )
                for c in lint_input.downstream_consumers
            ),
            broker=None if lint_input.broker is None else BrokerView(lint_input.broker),
        )

    @property
    def timing(self) -> Timing:
        return self.input.timing

    def timing_settings(self, *fields: str) -> tuple[Setting, ...]:
        """The timing assumptions ``fields`` (``max_batch_duration_ms`` and so on) as settings."""
        return tuple(Setting("timing", f, str(getattr(self.timing, f))) for f in fields)

    def rejected_source_option(self, key: str) -> Setting | None:
        """A ``kafka.<key>`` source option the kafka-eos source refuses at startup, if set."""
        if key not in SOURCE.refused:
            raise KeyError(f"the kafka-eos source does not reject kafka.{key}")
        value = self.input.source_option(f"kafka.{key}")
        return None if value is None else Setting("source option", f"kafka.{key}", value)

    def topic_missing(self, name: str) -> bool:
        """Whether the live cluster reported topic ``name`` as not existing."""
        return name in self.input.cluster.missing_topics

    def topic(self, name: str) -> TopicView | None:
        """The described topic ``name``, or ``None`` when nothing is known of it."""
        facts = self.input.cluster.topics.get(name)
        if facts is None:
            return None
        return TopicView(name, facts, self.broker or BrokerView({}))


def _view(
    role: Role, label: str, client: Client, config: Mapping[str, str] | None
) -> ClientView | None:
    return None if config is None else ClientView(role, label, client, config)


def _producer_view(lint_input: LintInput) -> ClientView | None:
    """The sink's producer: any producer on the run's client, or the kafka-eos sink's."""
    view = _view("producer", "producer", lint_input.client, lint_input.producer)
    if view is None or not lint_input.kafka_eos_sink:
        return view
    broker = BrokerView(lint_input.broker or {})  # unknown: a broker on Kafka's defaults
    chosen = default_transaction_timeout_ms(
        broker.get("transaction.max.timeout.ms").ms(), lint_input.timing.commit_window_ms
    )
    key = view.name("transaction.timeout.ms")
    setting = Setting(view.label, key, str(chosen), CHOSEN_NOTE)
    return dataclasses.replace(view, chosen={"transaction.timeout.ms": setting})


def _source_view(lint_input: LintInput) -> ClientView | None:
    """The source consumer: any consumer on the run's client, or the kafka-eos source."""
    if lint_input.consumer is None or not lint_input.kafka_eos_source:
        return _view("consumer", "source consumer", lint_input.client, lint_input.consumer)
    return ClientView(
        "consumer",
        "source consumer",
        SOURCE_CLIENT,
        lint_input.consumer,
        forced=SOURCE.forced,
        forced_by=SOURCE_NAME,
    )
