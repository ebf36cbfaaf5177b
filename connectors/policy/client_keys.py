"""Client key names and defaults: the Java client versus librdkafka (confluent-kafka).

The two clients spell several producer keys differently and disagree on some defaults
(most dangerously ``isolation.level``). Rules speak in canonical keys, the Java
spelling; this module maps a config as written onto them and supplies each client's
default for a key left unset.

Aliases depend on the client: librdkafka accepts both spellings, but the Java client
knows only its own and ignores ``message.timeout.ms`` (it logs "supplied but isn't a
known config"), so under Java a librdkafka spelling means nothing.

Sources: librdkafka ``CONFIGURATION.md`` and ``src/rdkafka_conf.c`` (v2.x); Apache Kafka
``ProducerConfig``/``ConsumerConfig``/broker docs (4.x).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

Client = Literal["java", "librdkafka"]
CLIENTS: tuple[Client, ...] = ("librdkafka", "java")
# Our connectors use confluent-kafka, i.e. librdkafka, so its defaults apply unless told.
DEFAULT_CLIENT: Client = "librdkafka"

Role = Literal["producer", "consumer"]

# librdkafka spelling -> canonical (Java) spelling. librdkafka accepts both spellings.
_LIBRDKAFKA_ALIASES: Mapping[str, str] = {
    "message.timeout.ms": "delivery.timeout.ms",
    "message.send.max.retries": "retries",
    "max.in.flight": "max.in.flight.requests.per.connection",
    "queue.buffering.max.ms": "linger.ms",
    "request.required.acks": "acks",
}
_LIBRDKAFKA_NAMES: Mapping[str, str] = {v: k for k, v in _LIBRDKAFKA_ALIASES.items()}

# Canonical key -> default per client. ``None``: the client has no such key.
_DEFAULTS: Mapping[Role, Mapping[str, Mapping[Client, str | None]]] = {
    "producer": {
        "transaction.timeout.ms": {"java": "60000", "librdkafka": "60000"},
        # librdkafka: 300000, but auto-adjusted to transaction.timeout.ms when transactional.
        "delivery.timeout.ms": {"java": "120000", "librdkafka": "300000"},
        "request.timeout.ms": {"java": "30000", "librdkafka": "30000"},
        "socket.timeout.ms": {"java": None, "librdkafka": "60000"},
        # Java: 5 since Kafka 4.0 (KIP-1030), 0 before.
        "linger.ms": {"java": "5", "librdkafka": "5"},
        # Java: true since Kafka 3.0. librdkafka: false, but forced on by transactional.id.
        "enable.idempotence": {"java": "true", "librdkafka": "false"},
        "acks": {"java": "all", "librdkafka": "all"},
        "retries": {"java": "2147483647", "librdkafka": "2147483647"},
        # librdkafka: 1000000, clamped to 5 when idempotent.
        "max.in.flight.requests.per.connection": {"java": "5", "librdkafka": "1000000"},
    },
    "consumer": {
        # The dangerous difference: Java reads aborted transactional records by default.
        "isolation.level": {"java": "read_uncommitted", "librdkafka": "read_committed"},
        "enable.auto.commit": {"java": "true", "librdkafka": "true"},
        "auto.offset.reset": {"java": "latest", "librdkafka": "largest"},
        "max.poll.interval.ms": {"java": "300000", "librdkafka": "300000"},
    },
}


def canonical(key: str, client: Client = DEFAULT_CLIENT) -> str:
    """The canonical (Java) key that ``key`` sets in ``client``; others are unchanged."""
    return _LIBRDKAFKA_ALIASES.get(key, key) if client == "librdkafka" else key


def native_name(key: str, client: Client) -> str:
    """How ``client``'s documentation spells the canonical ``key``."""
    return _LIBRDKAFKA_NAMES.get(key, key) if client == "librdkafka" else key


def client_default(role: Role, key: str, client: Client) -> str | None:
    """The default of canonical ``key`` for ``client``; ``None`` when it has none."""
    return _DEFAULTS[role].get(key, {}).get(client)


def find_key(config: Mapping[str, str], key: str, client: Client = DEFAULT_CLIENT) -> str | None:
    """The key as written in ``config`` that sets canonical ``key`` in ``client``, if any."""
    return next((written for written in config if canonical(written, client) == key), None)


def ignored_key(config: Mapping[str, str], key: str, client: Client) -> str | None:
    """A librdkafka spelling of canonical ``key`` in ``config`` that ``client`` ignores.

    Only the Java client ignores one; naming it tells a user why their value had no effect.
    """
    if client == "librdkafka":
        return None
    return next((k for k in config if k != key and canonical(k, "librdkafka") == key), None)


def merge_configs(
    base: Mapping[str, str] | None, override: Mapping[str, str] | None
) -> dict[str, str] | None:
    """``override`` on top of ``base``, alias-aware; ``None`` only when both are absent.

    ``message.timeout.ms`` in an override replaces ``delivery.timeout.ms`` in the base,
    so a key never appears twice under two spellings with different values. This holds
    for any client: a more specific layer restating a setting replaces it; the Java
    client then ignores the librdkafka spelling when the config is read (``context``).
    """
    if base is None and override is None:
        return None
    merged = dict(base or {})
    for key, value in (override or {}).items():
        setting = canonical(key, "librdkafka")
        for written in [k for k in merged if canonical(k, "librdkafka") == setting]:
            del merged[written]
        merged[key] = value
    return merged
