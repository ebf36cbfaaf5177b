"""librdkafka's own check of ``kafka.*`` options, at option parsing, before any task runs.

librdkafka validates every property's name and value when a client handle is created, and
before it connects: an unknown name or a value of the wrong type or range fails with
``_INVALID_ARG``. So both sides create a throwaway client from the user's settings, without
``bootstrap.servers`` and ``security.protocol``: no connection is attempted, no certificate or
keytab is read (they may exist only on the executors), and the handle is destroyed at once,
its threads joined (about 0.3 ms, measured with confluent-kafka 2.16). The error names
``kafka.<key>`` as written, its value (redacted if a secret) and what librdkafka expects.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Literal

from confluent_kafka import Consumer, KafkaException, Producer

from connectors.kafka_keys import KeyPolicy, KeyRefused
from connectors.options import OptionError

Role = Literal["producer", "consumer"]
# Left out of the check: the first two would start network I/O or read files on the driver,
# the plugins are shared libraries loaded as soon as the property is set.
_NOT_CHECKED = frozenset({"bootstrap.servers", "security.protocol", "plugin.library.paths"})
# librdkafka's complaints about a valid setup without brokers ("No bootstrap.servers") stay
# out of the user's log.
_QUIET = logging.getLogger("kafka_eos.librdkafka.check")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False
_log = logging.getLogger(__name__)
# Sample values that fall in the range of most of librdkafka's numeric properties.
_NUMBERS = ("1", "1000", "100000")


def checked_client_config(
    options: Mapping[str, str], policy: KeyPolicy, role: Role, error: type[OptionError]
) -> dict[str, str]:
    """The client settings of a side's ``kafka.*`` options (lower-cased keys, prefix kept):
    its key policy's refusals and translations of Java keys applied, then checked by librdkafka.
    Raises ``error`` (the side's option error) naming the option as written."""
    kafka = {k[len("kafka.") :]: v for k, v in options.items() if k.startswith("kafka.")}
    try:
        config, translated = policy.client_config(kafka)
    except KeyRefused as refused:
        raise error(f"kafka.{refused.key}", refused.value, refused.fix) from None
    written = {
        target: f"kafka.{java}" for java, targets in translated.items() for target in targets
    }
    check_client_config(config, role, error, written)
    for java, targets in translated.items():
        _log.info(
            "kafka-eos %s: kafka.%s is the Java client's key: set as %s",
            error.side,
            java,
            ", ".join(targets) or "nothing (librdkafka needs no such setting)",
        )
    return config


def check_client_config(
    config: Mapping[str, str], role: Role, error: type[OptionError], written: Mapping[str, str]
) -> None:
    """Raise ``error`` for the first setting of ``config`` librdkafka refuses. ``written``
    maps a librdkafka key back to the ``kafka.*`` option it came from (a translated Java key),
    so the error names what the user wrote."""
    settings = {k: v for k, v in config.items() if k not in _NOT_CHECKED}
    reason = _refusal(settings, role)
    if reason is None:
        return
    # Which key: the first one librdkafka refuses alone, for its name or value (a refusal when
    # the client is created is about a combination: ssl.keystore.location needs its password).
    for key in sorted(settings):
        alone = _refusal({key: settings[key]}, role)
        if alone is not None and not alone.startswith("Failed to create"):
            option = written.get(key, f"kafka.{key}")
            raise error(option, settings[key], _fix(key, settings[key], alone, role))
    keys = ", ".join(f"kafka.{key}" for key in sorted(settings))
    raise error("kafka.*", keys, f"librdkafka refuses these settings together: {reason}")


def _refusal(settings: Mapping[str, str], role: Role) -> str | None:
    """librdkafka's reason for refusing ``settings``, or ``None`` when it accepts them."""
    config: dict[str, object] = {**settings, "logger": _QUIET}
    try:
        if role == "producer":
            Producer(config).close()
        else:
            Consumer({"group.id": "kafka-eos-option-check", **config}).close()
    except KafkaException as exc:
        return str(exc.args[0].str()).strip()
    except (TypeError, ValueError) as exc:  # confluent-kafka's own keys (callbacks)
        return str(exc)
    return None


def _fix(key: str, value: str, reason: str, role: Role) -> str:
    if reason.startswith("No such configuration property"):
        return (
            f"librdkafka has no property {key!r} ({reason}). kafka.* options go to librdkafka "
            "without the prefix, so they must use librdkafka's names (its CONFIGURATION.md); "
            "the Java client's keys librdkafka lacks are translated or refused with the key to "
            "use (docs/options.md)"
        )
    return f"librdkafka refuses it ({reason}): {_expected(key, role)}"


def _expected(key: str, role: Role) -> str:
    """What kind of value ``key`` takes, found by asking librdkafka about sample values."""
    if _refusal({key: "true"}, role) is None:
        return "expected true or false"
    if all(_refusal({key: number}, role) is not None for number in _NUMBERS):
        return "expected one of the values librdkafka's CONFIGURATION.md lists for it"
    return (
        "expected a number, in the property's unit (ms, bytes, ...), within its range in "
        "librdkafka's CONFIGURATION.md"
    )
