"""The source's Kafka client: which ``kafka.*`` options reach librdkafka, and the consumer.

Spark passes ``kafka.*`` options to the Java consumer; here they go to librdkafka
(confluent-kafka) without the prefix, so they must use librdkafka's names. Keys that Spark
rejects, keys the source must own, and Java-only keys that librdkafka lacks fail up front,
each with what to use instead.

>>> librdkafka_config({"kafka.security.protocol": "SSL", "kafka.group.id": "g", "subscribe": "t"})
{'security.protocol': 'SSL'}
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from confluent_kafka import Consumer, KafkaError, KafkaException

from checkpoint.deadline import Deadline
from connectors.kafka.source_errors import SourceOptionError

if TYPE_CHECKING:
    from connectors.kafka.source_options import SourceOptions

LIBRDKAFKA_LOGGER = logging.getLogger("kafka_eos.source.librdkafka")

# Kafka keys Spark rejects, plus the two the source must own; each with what to do instead.
_REJECTED = {
    "auto.offset.reset": "set the source option startingOffsets (earliest, latest or JSON) "
    "instead; offsets that are gone are handled by failOnDataLoss",
    "enable.auto.commit": "offsets live in Spark's checkpoint and tasks never commit; set "
    "kafka.group.id to have the driver commit completed batches for lag monitoring",
    "key.deserializer": "keys are always read as bytes (a binary column); deserialize them "
    "with DataFrame operations, e.g. CAST(key AS STRING)",
    "value.deserializer": "values are always read as bytes (a binary column); deserialize them "
    "with DataFrame operations, e.g. CAST(value AS STRING) or from_json",
    "interceptor.classes": "interceptors are JVM classes and this source reads through "
    "librdkafka (confluent-kafka); remove the option",
    "enable.auto.offset.store": "the source sets it (false); remove the option",
    "enable.partition.eof": "the source sets it (false); remove the option",
}

# Java-client keys that librdkafka does not know, with the librdkafka way to say the same.
_JAVA_ONLY = {
    "sasl.jaas.config": "librdkafka has no JAAS: use kafka.sasl.mechanism with "
    "kafka.sasl.username and kafka.sasl.password (or kafka.sasl.oauthbearer.*)",
    "ssl.truststore.location": "use kafka.ssl.ca.location with a PEM file",
    "ssl.truststore.password": "use kafka.ssl.ca.location with a PEM file (no password)",
    "ssl.truststore.type": "use kafka.ssl.ca.location with a PEM file",
    "max.poll.records": "the source sizes its own batches; remove the option",
    "fetch.max.wait.ms": "librdkafka calls it kafka.fetch.wait.max.ms",
    "receive.buffer.bytes": "librdkafka calls it kafka.socket.receive.buffer.bytes",
    "send.buffer.bytes": "librdkafka calls it kafka.socket.send.buffer.bytes",
}

# Errors a later attempt can overcome, beyond those librdkafka flags as retriable.
_TRANSIENT = frozenset(
    {
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
    }
)
# "Unknown topic or partition": gone, or not known yet to the broker that answered. Neither
# kind by itself: a caller decides, e.g. with topic_gone.
UNKNOWN_PARTITION = frozenset(
    {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC, KafkaError._UNKNOWN_PARTITION}
)
# How long "unknown" must persist before a partition that existed counts as deleted.
_GONE_CONFIRM_S = 2.0
_GONE_POLL_S = 0.5
# Read by the source itself (SourceOptions fields), not passed on to librdkafka.
_SOURCE_KEYS = frozenset(
    {"bootstrap.servers", "group.id", "isolation.level", "default.api.timeout.ms"}
)


def librdkafka_config(opts: Mapping[str, str]) -> dict[str, str]:
    """``kafka.*`` options (lower-cased keys) without the prefix, minus the source's own."""
    config: dict[str, str] = {}
    for key, value in opts.items():
        if not key.startswith("kafka."):
            continue
        name = key[len("kafka.") :]
        if name in _REJECTED:
            raise SourceOptionError(key, value, f"it is not supported: {_REJECTED[name]}")
        if name in _JAVA_ONLY:
            raise SourceOptionError(key, value, f"it is a Java-client key: {_JAVA_ONLY[name]}")
        if name not in _SOURCE_KEYS:
            config[name] = value
    return config


def consumer_config(options: SourceOptions, group_id: str) -> dict[str, object]:
    """librdkafka settings for an assign-only consumer that never commits on its own."""
    return {
        **options.client_config,
        "bootstrap.servers": options.bootstrap_servers,
        "group.id": group_id,
        "isolation.level": options.isolation_level,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": False,
        # An out-of-range start must surface as an error (data loss), never a silent reset.
        "auto.offset.reset": "error",
    }


def open_consumer(options: SourceOptions, group_id: str, **callbacks: object) -> Consumer:
    """A confluent-kafka consumer whose logs go to Python logging, not straight to stderr.

    ``callbacks`` are librdkafka callbacks such as ``on_commit``.
    """
    config = {**consumer_config(options, group_id), "logger": LIBRDKAFKA_LOGGER, **callbacks}
    try:
        return Consumer(config)
    except KafkaException as exc:
        keys = ", ".join(f"kafka.{key}" for key in sorted(options.client_config)) or "none"
        raise SourceOptionError(
            "kafka.*",
            keys,
            f"librdkafka rejected the client configuration: {exc.args[0].str()}. Options "
            "prefixed kafka. are passed to librdkafka without the prefix, so they must use "
            "librdkafka's names (see librdkafka's CONFIGURATION.md), not the Java client's",
        ) from exc


def is_transient(error: KafkaError) -> bool:
    """Whether waiting can overcome ``error``: no leader yet, a broker briefly unreachable."""
    return not error.fatal() and (error.retriable() or error.code() in _TRANSIENT)


def topic_gone(consumer: Consumer, topic: str, partition: int) -> bool:
    """Whether the partition is really deleted: every metadata answer for about two seconds
    says it does not exist. A broker that has not caught up, or one restarting, answers
    "unknown" for a moment; an unreachable broker proves nothing, so it counts as not gone.
    """
    deadline = Deadline(_GONE_CONFIRM_S)
    answers = 0
    while True:
        try:
            metadata = consumer.list_topics(topic, timeout=max(deadline.remaining(), _GONE_POLL_S))
        except KafkaException:
            return False
        found = metadata.topics.get(topic)
        if found is not None and found.error is None and partition in found.partitions:
            return False
        if (
            found is not None
            and found.error is not None
            and (found.error.code() not in UNKNOWN_PARTITION)
        ):
            return False
        answers += 1
        if deadline.expired() and answers >= 2:
            return True
        time.sleep(deadline.bound(_GONE_POLL_S))
