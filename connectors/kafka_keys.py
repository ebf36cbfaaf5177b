"""Which ``kafka.*`` keys each side refuses, forces, keeps for itself, translates or passes through.

The one table of that policy: the source and the sink enforce it when they parse their options,
and the linter reads it to see a pipeline file's ``source:`` and ``sink:`` sections as the
connectors run them. No Kafka client is imported here, so the linter can read it without one.

Spark users pass the Java client's keys; both sides read them through librdkafka. A Java key
with a librdkafka equivalent is translated (:data:`JAVA_KEYS`), one without is refused with
the key to use instead, in the same words on both sides:

>>> SOURCE.client_config({"max.request.size": "2097152", "acks": "all"})[0]
{'acks': 'all', 'message.max.bytes': '2097152'}
>>> SINK.client_config({"ssl.truststore.location": "/etc/ts.jks"})
Traceback (most recent call last):
...
connectors.kafka_keys.KeyRefused: ssl.truststore.location: it is a Java-client key: ...PEM...
>>> SOURCE.refusal("enable.auto.commit").startswith("it is not supported")
True
>>> SINK.refusal("acks") is None
True
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from connectors.options import is_digits


class KeyRefused(ValueError):
    """A ``kafka.<key>`` option a side cannot run with; ``fix`` says what to set instead. Each
    side raises it again as its own option error (``SourceOptionError``, ``SinkOptionError``)."""

    def __init__(self, key: str, value: str, fix: str) -> None:
        self.key = key
        self.value = value
        self.fix = fix
        super().__init__(f"{key}: {fix}")


# How a Java key's value becomes librdkafka settings: the Java key's value and every kafka.*
# key set beside it (some translations depend on a sibling) -> librdkafka key -> value.
# Raises _Untranslatable with the fix when this value has no librdkafka equivalent.
Translate = Callable[[str, Mapping[str, str]], dict[str, str]]


class _Untranslatable(ValueError):
    pass


@dataclass(frozen=True)
class JavaKey:
    """A Java-client key librdkafka lacks. ``becomes`` names the librdkafka key(s) it is
    translated to ("" when it never is); ``how`` says how, or what to use instead."""

    becomes: str
    how: str
    translate: Translate | None = None  # None: always refused, with ``how`` as the fix


def _renamed(target: str) -> Translate:
    return lambda value, _: {target: value}


def _buffer_memory(value: str, _: Mapping[str, str]) -> dict[str, str]:
    if not is_digits(value.strip()):
        raise _Untranslatable("expected a whole number of bytes, e.g. 33554432")
    # librdkafka counts KiB; rounding up never makes the queue smaller than Java's buffer.
    return {"queue.buffering.max.kbytes": str(max(1, math.ceil(int(value) / 1024)))}


# The Java client's default partitioner (murmur2 of the key), by the names it has had.
_JAVA_DEFAULT_PARTITIONERS = frozenset(
    {
        "org.apache.kafka.clients.producer.internals.DefaultPartitioner",
        "DefaultPartitioner",
    }
)
_PARTITIONER_FIX = (
    "librdkafka runs no Java classes: remove it to keep Java's default partitioner (murmur2 of "
    "the key, librdkafka's murmur2_random, the sink's default), or set kafka.partitioner to "
    "one of librdkafka's: murmur2_random, murmur2, consistent_random, consistent, random, "
    "fnv1a, fnv1a_random"
)


def _partitioner(value: str, _: Mapping[str, str]) -> dict[str, str]:
    if value.strip() not in _JAVA_DEFAULT_PARTITIONERS:
        raise _Untranslatable(_PARTITIONER_FIX)
    return {"partitioner": "murmur2_random"}


# One JAAS entry: LoginModule class, control flag, options key="value" (or key=value), ';'.
_JAAS_ENTRY = re.compile(r"\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\s+(.*?);?\s*")
_JAAS_OPTION = re.compile(r'\s*([\w.]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s";]+))')
_PASSWORD_MODULES = {
    "org.apache.kafka.common.security.plain.PlainLoginModule": "PLAIN",
    "org.apache.kafka.common.security.scram.ScramLoginModule": "SCRAM-SHA-256 or SCRAM-SHA-512",
}
_JAAS_FIX = (
    "librdkafka has no JAAS. Only a PlainLoginModule or ScramLoginModule entry with just "
    "username and password is translated (to kafka.sasl.username and kafka.sasl.password); "
    "for this one set kafka.sasl.mechanism with kafka.sasl.username and kafka.sasl.password, "
    "kafka.sasl.kerberos.* for GSSAPI, or kafka.sasl.oauthbearer.* for OAUTHBEARER"
)


def _jaas(value: str, config: Mapping[str, str]) -> dict[str, str]:
    """username and password of one PLAIN or SCRAM login entry. The value holds a password:
    errors say what is wrong with its form, never echo it."""
    entry = _JAAS_ENTRY.fullmatch(value)
    if entry is None or entry.group(1) not in _PASSWORD_MODULES or entry.group(2) != "required":
        raise _Untranslatable(_JAAS_FIX)
    options: dict[str, str] = {}
    rest = entry.group(3)
    while rest.strip():
        option = _JAAS_OPTION.match(rest)
        if option is None:
            raise _Untranslatable(_JAAS_FIX)
        quoted, bare = option.group(2), option.group(3)
        options[option.group(1)] = re.sub(r"\\(.)", r"\1", quoted) if bare is None else bare
        rest = rest[option.end() :]
    if set(options) != {"username", "password"}:
        raise _Untranslatable(_JAAS_FIX)
    if "sasl.mechanism" not in config and "sasl.mechanisms" not in config:
        # Java needs it too; without it librdkafka would try GSSAPI with these credentials.
        raise _Untranslatable(
            f"set kafka.sasl.mechanism ({_PASSWORD_MODULES[entry.group(1)]}) beside it, as the "
            "Java client needs too: it is translated to kafka.sasl.username and "
            "kafka.sasl.password"
        )
    return {"sasl.username": options["username"], "sasl.password": options["password"]}


_TRUSTSTORE_FIX = (
    "librdkafka reads CA certificates as PEM, not a Java truststore: export them with "
    "`keytool -exportcert -rfc -keystore <truststore> -alias <alias> -file ca.pem` and set "
    "kafka.ssl.ca.location=ca.pem (kafka.ssl.truststore.type=PEM with a PEM file is translated)"
)
_KEYSTORE_FIX = (
    "librdkafka's kafka.ssl.keystore.location is a PKCS#12 file: convert a JKS keystore with "
    "`keytool -importkeystore -srckeystore <keystore.jks> -destkeystore keystore.p12 "
    "-deststoretype PKCS12`, or give PEM files with kafka.ssl.certificate.location and "
    "kafka.ssl.key.location"
)
_JVM_ONLY = "a setting of the JVM's TLS or login machinery with no meaning for librdkafka"


def _truststore_type(config: Mapping[str, str]) -> str:
    return config.get("ssl.truststore.type", "JKS").strip().upper()  # Java's default: JKS


def _truststore_location(value: str, config: Mapping[str, str]) -> dict[str, str]:
    if _truststore_type(config) != "PEM":
        raise _Untranslatable(_TRUSTSTORE_FIX)
    return {"ssl.ca.location": value}


def _truststore_type_key(value: str, config: Mapping[str, str]) -> dict[str, str]:
    if _truststore_type(config) != "PEM":
        raise _Untranslatable(_TRUSTSTORE_FIX)
    return {}  # read with kafka.ssl.truststore.location or kafka.ssl.truststore.certificates


def _keystore_type(value: str, config: Mapping[str, str]) -> dict[str, str]:
    kind = value.strip().upper()
    if kind == "PKCS12" or (kind == "PEM" and "ssl.keystore.location" not in config):
        return {}  # librdkafka's keystore is PKCS#12; a PEM key and chain are translated
    raise _Untranslatable(_KEYSTORE_FIX)


# Java key -> what librdkafka makes of it. The table of docs/options.md, tested against it.
JAVA_KEYS: Mapping[str, JavaKey] = {
    "max.request.size": JavaKey(
        "message.max.bytes",
        "same value: the largest request, and so record, in bytes",
        _renamed("message.max.bytes"),
    ),
    "buffer.memory": JavaKey(
        "queue.buffering.max.kbytes",
        "bytes divided by 1024, rounded up: librdkafka counts the producer's queue in KiB",
        _buffer_memory,
    ),
    "max.block.ms": JavaKey(
        "",
        "refused: librdkafka's produce never blocks (a record waits at most "
        "kafka.message.timeout.ms for its partition's leader) and the sink bounds its flush "
        "and commit with its options flushTimeoutMs and commitTimeoutMs: remove it, or set those",
    ),
    "partitioner.class": JavaKey(
        "partitioner",
        "Java's DefaultPartitioner becomes murmur2_random (the same hash, the sink's default); "
        "any other class is refused: set kafka.partitioner to one of librdkafka's partitioners",
        _partitioner,
    ),
    "sasl.jaas.config": JavaKey(
        "sasl.username, sasl.password",
        "a PlainLoginModule or ScramLoginModule entry with only username and password, beside "
        "kafka.sasl.mechanism, becomes librdkafka's username and password; any other entry "
        "is refused: set kafka.sasl.kerberos.* (GSSAPI) or kafka.sasl.oauthbearer.*",
        _jaas,
    ),
    "sasl.login.callback.handler.class": JavaKey(
        "", f"refused: {_JVM_ONLY}; use kafka.sasl.oauthbearer.*"
    ),
    "sasl.client.callback.handler.class": JavaKey("", f"refused: {_JVM_ONLY}; remove it"),
    "sasl.login.class": JavaKey("", f"refused: {_JVM_ONLY}; remove it"),
    "ssl.truststore.location": JavaKey(
        "ssl.ca.location",
        "the same file when kafka.ssl.truststore.type is PEM; a JKS or PKCS12 truststore is "
        "refused: export its certificates to PEM with keytool and set kafka.ssl.ca.location",
        _truststore_location,
    ),
    "ssl.truststore.type": JavaKey(
        "",
        "PEM is dropped (its file is translated); JKS or PKCS12 is refused, as for "
        "kafka.ssl.truststore.location",
        _truststore_type_key,
    ),
    "ssl.truststore.password": JavaKey(
        "",
        "refused: librdkafka reads CA certificates from a PEM file, which has no password; "
        "use kafka.ssl.ca.location",
    ),
    "ssl.truststore.certificates": JavaKey(
        "ssl.ca.pem", "same value: the CA certificates as PEM text", _renamed("ssl.ca.pem")
    ),
    "ssl.keystore.type": JavaKey(
        "",
        "PKCS12 is dropped (librdkafka's kafka.ssl.keystore.location is PKCS#12), and so is "
        "PEM with kafka.ssl.keystore.key and .certificate.chain; JKS, or PEM with a keystore "
        "file, is refused: convert the keystore to PKCS#12 with keytool, or give PEM files with "
        "kafka.ssl.certificate.location and kafka.ssl.key.location",
        _keystore_type,
    ),
    "ssl.keystore.key": JavaKey(
        "ssl.key.pem", "same value: the private key as PEM text", _renamed("ssl.key.pem")
    ),
    "ssl.keystore.certificate.chain": JavaKey(
        "ssl.certificate.pem",
        "same value: the certificate chain as PEM text",
        _renamed("ssl.certificate.pem"),
    ),
    "ssl.protocol": JavaKey(
        "", f"refused: {_JVM_ONLY} (OpenSSL negotiates the TLS version); remove it"
    ),
    "ssl.enabled.protocols": JavaKey(
        "", f"refused: {_JVM_ONLY} (OpenSSL negotiates the TLS version); remove it"
    ),
    "ssl.keymanager.algorithm": JavaKey("", f"refused: {_JVM_ONLY}; remove it"),
    "ssl.trustmanager.algorithm": JavaKey("", f"refused: {_JVM_ONLY}; remove it"),
    "ssl.provider": JavaKey("", f"refused: {_JVM_ONLY}; remove it"),
    "ssl.secure.random.implementation": JavaKey("", f"refused: {_JVM_ONLY}; remove it"),
    "max.poll.records": JavaKey(
        "",
        "refused: the kafka-eos source sizes its own reads (bound batches with "
        "maxOffsetsPerTrigger); remove it",
    ),
    "fetch.max.wait.ms": JavaKey(
        "fetch.wait.max.ms", "same value, librdkafka's name", _renamed("fetch.wait.max.ms")
    ),
    "receive.buffer.bytes": JavaKey(
        "socket.receive.buffer.bytes",
        "same value, librdkafka's name",
        _renamed("socket.receive.buffer.bytes"),
    ),
    "send.buffer.bytes": JavaKey(
        "socket.send.buffer.bytes",
        "same value, librdkafka's name",
        _renamed("socket.send.buffer.bytes"),
    ),
}


def java_translation(key: str, value: str, config: Mapping[str, str]) -> dict[str, str]:
    """The librdkafka settings Java key ``key`` (in :data:`JAVA_KEYS`) becomes, given every
    ``kafka.*`` key of the side (``config``, without the prefix); :class:`KeyRefused` with the
    fix when it becomes none, or contradicts a librdkafka key set beside it."""
    java = JAVA_KEYS[key]
    if java.translate is None:
        raise KeyRefused(
            key, value, f"it is a Java-client key: {java.how.removeprefix('refused: ')}"
        )
    try:
        settings = java.translate(value, config)
    except _Untranslatable as exc:
        raise KeyRefused(key, value, f"it is a Java-client key: {exc}") from None
    for target, translated in settings.items():
        if target in config and config[target] != translated:
            raise KeyRefused(
                key,
                value,
                f"it is the Java client's name for kafka.{target}, which is set too, to "
                "another value: keep one",
            )
    return settings


@dataclass(frozen=True)
class KeyPolicy:
    """One side's ``kafka.*`` keys (without the prefix); any other key passes through to the
    client unchanged, once librdkafka has checked it.

    - ``refused``: the side fails at option parsing, saying what to do instead;
    - ``forced``: values the side sets whatever the options say (Kafka's spelling);
    - ``own``: keys the side reads itself rather than handing them to the client;
    - ``defaults``: librdkafka settings given the Java client's default where librdkafka's
      would make a job written for Spark's connector fail, unless the options set them.

    Java-client keys (:data:`JAVA_KEYS`) are translated or refused alike on both sides.
    """

    refused: Mapping[str, str]
    forced: Mapping[str, str] = field(default_factory=dict)
    own: frozenset[str] = frozenset()
    defaults: Mapping[str, str] = field(default_factory=dict)

    def refusal(self, key: str) -> str | None:
        """Why this side refuses ``kafka.<key>`` whatever its value, with the fix; ``None``
        when it may be accepted (a Java key may still be refused for its value)."""
        if key in self.refused:
            return f"it is not supported: {self.refused[key]}"
        java = JAVA_KEYS.get(key)
        if java is not None and java.translate is None:
            return f"it is a Java-client key: {java.how.removeprefix('refused: ')}"
        return None

    def client_config(
        self, options: Mapping[str, str]
    ) -> tuple[dict[str, str], dict[str, tuple[str, ...]]]:
        """The client settings for ``kafka.*`` options (keys without the prefix), and the Java
        keys translated (Java key -> the librdkafka keys it became). Keys the side owns stay
        out; the first refused key, in key order, raises :class:`KeyRefused`."""
        config: dict[str, str] = {}
        translated: dict[str, tuple[str, ...]] = {}
        for key in sorted(options):
            value = options[key]
            refusal = self.refusal(key)
            if refusal is not None:
                raise KeyRefused(key, value, refusal)
            if key in JAVA_KEYS:
                settings = java_translation(key, value, options)
                config.update(settings)
                translated[key] = tuple(settings)
            elif key not in self.own:
                config.setdefault(key, value)
        for key, value in self.defaults.items():
            config.setdefault(key, value)
        return dict(sorted(config.items())), translated


def java_keys_table() -> str:
    """The Markdown table of :data:`JAVA_KEYS` that docs/options.md shows."""
    rows = ["| Java key | librdkafka | how |", "| --- | --- | --- |"]
    for key, java in sorted(JAVA_KEYS.items()):
        becomes = ", ".join(f"`{k}`" for k in java.becomes.split(", ")) if java.becomes else "—"
        rows.append(f"| `{key}` | {becomes} | {java.how} |")
    return "\n".join(rows)


# The options Spark's own ``kafka`` format reads (KafkaSourceProvider, Spark 4.x), plus the
# ``path`` any format may be given. Each side accepts those it does not use, as Spark's does:
# a job moved from ``format("kafka")`` with a source option on its writer keeps running.
SPARK_KAFKA_OPTIONS = (
    "subscribe",
    "subscribePattern",
    "assign",
    "startingOffsets",
    "endingOffsets",
    "startingOffsetsByTimestamp",
    "endingOffsetsByTimestamp",
    "startingTimestamp",
    "endingTimestamp",
    "startingOffsetsByTimestampStrategy",
    "failOnDataLoss",
    "minPartitions",
    "maxRecordsPerPartition",
    "maxOffsetsPerTrigger",
    "minOffsetsPerTrigger",
    "maxTriggerDelay",
    "fetchOffset.numRetries",
    "fetchOffset.retryIntervalMs",
    "kafkaConsumer.pollTimeoutMs",
    "groupIdPrefix",
    "includeHeaders",
    "topic",
    "path",
)

SOURCE = KeyPolicy(
    # Keys Spark's source rejects too, plus those the source must own.
    refused={
        "auto.offset.reset": "set the source option startingOffsets (earliest, latest or JSON) "
        "instead; offsets that are gone are handled by failOnDataLoss",
        "enable.auto.commit": "offsets live in Spark's checkpoint and tasks never commit; set "
        "kafka.group.id to have the driver commit completed batches for lag monitoring",
        "key.deserializer": "keys are always read as bytes (a binary column); deserialize them "
        "with DataFrame operations, e.g. CAST(key AS STRING)",
        "value.deserializer": "values are always read as bytes (a binary column); deserialize "
        "them with DataFrame operations, e.g. CAST(value AS STRING) or from_json",
        "interceptor.classes": "interceptors are JVM classes and this source reads through "
        "librdkafka (confluent-kafka); remove the option",
        "enable.auto.offset.store": "the source sets it (false); remove the option",
        "enable.partition.eof": "the source sets it; remove the option",
    },
    forced={
        "enable.auto.commit": "false",
        "enable.auto.offset.store": "false",
        "enable.partition.eof": "false",
        # An out-of-range start must surface as an error (data loss), never a silent reset.
        "auto.offset.reset": "error",
    },
    own=frozenset({"bootstrap.servers", "group.id", "isolation.level", "default.api.timeout.ms"}),
)

SINK = KeyPolicy(
    # Keys Spark's sink rejects too, or that the guarantee depends on and the sink sets.
    refused={
        "transactional.id": "the sink names transactions itself: set 'transactionalIdPrefix'",
        "key.serializer": "keys are written as bytes: cast the 'key' column to string or binary",
        "value.serializer": "values are written as bytes: cast the 'value' column to string or "
        "binary",
        "interceptor.classes": "interceptors are JVM classes and this sink writes through "
        "librdkafka (confluent-kafka); remove the option",
    },
    # librdkafka's 1,000,000 refused records of 1,000,000 to 1,048,489 bytes that Spark's sink
    # writes (Java's max.request.size, 1,048,576, counts the batch header and the record's
    # overhead). librdkafka counts a record's overhead as 36 bytes and no batch header (61):
    # at 1,048,576 it took records whose batch is above the broker's default max.message.bytes,
    # 1,048,588, refused only in the delivery report. 1,048,588 - 61 takes every record Java
    # takes, and nothing the broker's default refuses.
    defaults={"message.max.bytes": "1048527"},
)
