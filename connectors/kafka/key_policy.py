"""Which ``kafka.*`` keys each side refuses, forces, keeps for itself or passes through.

The one table of that policy: the source and the sink enforce it at startup, and the linter
reads it to see a pipeline file's ``source:`` and ``sink:`` sections as the connectors run
them. No Kafka client is imported here, so the linter can read it without one.

>>> SOURCE.refusal("enable.auto.commit").startswith("it is not supported")
True
>>> SOURCE.refusal("ssl.truststore.location")
'it is a Java-client key: use kafka.ssl.ca.location with a PEM file'
>>> SINK.refusal("acks") is None
True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class KeyPolicy:
    """One side's ``kafka.*`` keys (without the prefix); any other key passes through to the
    client unchanged.

    - ``refused``: the side fails at startup, saying what to do instead;
    - ``java_only``: Java-client keys librdkafka lacks, with the librdkafka way to say it;
    - ``forced``: values the side sets whatever the options say (Kafka's spelling);
    - ``own``: keys the side reads itself rather than handing them to the client.
    """

    refused: Mapping[str, str]
    forced: Mapping[str, str] = field(default_factory=dict)
    java_only: Mapping[str, str] = field(default_factory=dict)
    own: frozenset[str] = frozenset()

    def refusal(self, key: str) -> str | None:
        """Why ``kafka.<key>`` is refused, with the fix; ``None`` when it is accepted."""
        if key in self.refused:
            return f"it is not supported: {self.refused[key]}"
        if key in self.java_only:
            return f"it is a Java-client key: {self.java_only[key]}"
        return None


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
    java_only={
        "sasl.jaas.config": "librdkafka has no JAAS: use kafka.sasl.mechanism with "
        "kafka.sasl.username and kafka.sasl.password (or kafka.sasl.oauthbearer.*)",
        "ssl.truststore.location": "use kafka.ssl.ca.location with a PEM file",
        "ssl.truststore.password": "use kafka.ssl.ca.location with a PEM file (no password)",
        "ssl.truststore.type": "use kafka.ssl.ca.location with a PEM file",
        "max.poll.records": "the source sizes its own batches; remove the option",
        "fetch.max.wait.ms": "librdkafka calls it kafka.fetch.wait.max.ms",
        "receive.buffer.bytes": "librdkafka calls it kafka.socket.receive.buffer.bytes",
        "send.buffer.bytes": "librdkafka calls it kafka.socket.send.buffer.bytes",
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
    },
)
