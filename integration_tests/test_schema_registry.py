"""confluent_kafka's schema-registry client and Avro serdes against a real registry.

The registry is Apicurio Registry from Maven Central, run by the ``schema_registry`` fixture
(``integration_tests/registry_fixtures.py``); the client talks to its Confluent-compatible API.
No Kafka is needed: the serdes only turn records into bytes and back through the registry.
"""

from __future__ import annotations

import json
import struct
import urllib.request
import uuid

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from kafka_eos.cluster.registry import DEFAULT_REGISTRY_VERSION, SchemaRegistry

# A Kafka-side service like the brokers: a real server process, never a stand-in.
pytestmark = pytest.mark.kafka

ORDER_SCHEMA = {
    "type": "record",
    "name": "Order",
    "namespace": "kafka_eos.test",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "item", "type": "string"},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}


def _subject() -> str:
    return f"orders-{uuid.uuid4().hex[:12]}-value"


def test_the_registry_is_apicurio(schema_registry: SchemaRegistry) -> None:
    """The server answering is Apicurio Registry of the fetched version, not something else
    listening on the port."""
    with urllib.request.urlopen(f"{schema_registry.base_url}/apis/registry/v3/system/info") as r:
        info = json.load(r)
    assert info["name"].startswith("Apicurio Registry")
    assert info["version"] == DEFAULT_REGISTRY_VERSION


def test_register_and_get_round_trip(schema_registry: SchemaRegistry) -> None:
    client = SchemaRegistryClient({"url": schema_registry.url})
    subject = _subject()
    schema_id = client.register_schema(subject, Schema(json.dumps(ORDER_SCHEMA), "AVRO"))

    fetched = client.get_schema(schema_id)
    assert fetched.schema_type == "AVRO"
    assert json.loads(fetched.schema_str) == ORDER_SCHEMA

    latest = client.get_latest_version(subject)
    assert (latest.subject, latest.version, latest.schema_id) == (subject, 1, schema_id)
    assert json.loads(latest.schema.schema_str) == ORDER_SCHEMA
    assert subject in client.get_subjects()

    # The same schema again is the same version, with the same id.
    again = SchemaRegistryClient({"url": schema_registry.url})  # no cache of the first's
    assert again.register_schema(subject, Schema(json.dumps(ORDER_SCHEMA), "AVRO")) == schema_id
    assert again.get_latest_version(subject).version == 1


def test_avro_serializer_and_deserializer_round_trip(schema_registry: SchemaRegistry) -> None:
    topic = f"orders-{uuid.uuid4().hex[:12]}"
    context = SerializationContext(topic, MessageField.VALUE)
    serializer = AvroSerializer(
        SchemaRegistryClient({"url": schema_registry.url}), json.dumps(ORDER_SCHEMA)
    )
    records = [
        {"id": 1, "item": "apple", "note": None},
        {"id": 2**40, "item": "pear", "note": "ripe"},
    ]
    payloads = [serializer(record, context) for record in records]

    # Confluent's wire format: magic byte 0, the schema's id (big-endian int32), Avro binary.
    # The serializer registered the schema under the topic's value subject.
    registered = SchemaRegistryClient({"url": schema_registry.url}).get_latest_version(
        f"{topic}-value"
    )
    for payload in payloads:
        magic, schema_id = struct.unpack(">bI", payload[:5])
        assert (magic, schema_id) == (0, registered.schema_id)

    # A deserializer with a client of its own must fetch the writer's schema from the registry.
    deserializer = AvroDeserializer(SchemaRegistryClient({"url": schema_registry.url}))
    assert [deserializer(payload, context) for payload in payloads] == records
