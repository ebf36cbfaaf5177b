"""Avro through real Kafka, a real schema registry (Apicurio, Confluent-compatible API) and a
real SparkSession: every type of issue 17 round-trips from Confluent's own serializer, through
the kafka-eos source and the exactly-once sink, back out; evolution; malformed records in both
modes; a value that does not fit the sink's schema writes nothing.

All share the session's SparkSession: none of them kills anything.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from avro_samples import EVERY_TYPE, EXPECTED, order
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from fastavro import parse_schema, schemaless_writer
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from connectors.avro.codec import AvroDecoder
from connectors.avro.registry import SchemaRegistry
from connectors.avro.schema import parse
from connectors.spark import register
from integration_tests.conftest import create_topic
from kafka_eos.cluster import KafkaCluster
from kafka_eos.cluster.registry import SchemaRegistry as RegistryServer
from kafka_eos.operations.drain import drain

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

ROWS = 24


def _as_avro(row: dict[str, Any]) -> dict[str, Any]:
    """A row as Arrow gives it (maps as pairs) as Avro serializers take it (maps as dicts)."""
    out = dict(row)
    out["counts"] = dict(row["counts"])
    out["lines"] = [{**line, "scores": dict(line["scores"])} for line in row["lines"]]
    return out


def _produce(bootstrap: str, topic: str, values: list[bytes | None]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for value in values:
        producer.produce(topic, value=value, partition=0)
    assert producer.flush(60) == 0


def _raw(schema: dict[str, Any], datum: Any) -> bytes:
    buf = io.BytesIO()
    schemaless_writer(buf, parse_schema(schema), datum)
    return buf.getvalue()


def _avro_pipeline(
    spark: SparkSession,
    bootstrap: str,
    source: str,
    sink: str,
    tmp_path: Path,
    *,
    columns: tuple[str, ...],
    read: dict[str, str],
    write: dict[str, str],
) -> StreamingQuery:
    """``source`` -> the kafka-eos source -> ``columns`` -> the exactly-once sink -> ``sink``,
    Avro values on both ends, once over what is there (availableNow)."""
    return (
        spark.readStream.format("kafka-eos")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("valueFormat", "avro")
        .options(**read)
        .load()
        .select(*columns)
        .writeStream.format("kafka-eos")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("valueFormat", "avro")
        .options(**write)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )


def test_every_type_round_trips_exactly_once_through_the_registry(
    spark: SparkSession, kafka: KafkaCluster, schema_registry: RegistryServer, tmp_path: Path
) -> None:
    """The issue's 'done when': Confluent-wire-format Avro in, Avro out exactly once."""
    register(spark)
    bootstrap = kafka.bootstrap_servers
    source, sink = create_topic(bootstrap, 2), create_topic(bootstrap, 3)
    client = SchemaRegistryClient({"url": schema_registry.url})
    serialize = AvroSerializer(client, json.dumps(EVERY_TYPE))
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(ROWS):
        context = SerializationContext(source, MessageField.VALUE)
        producer.produce(source, key=str(i).encode(), value=serialize(_as_avro(order(i)), context))
    assert producer.flush(60) == 0

    registry = {"schema.registry.url": schema_registry.url}
    query = _avro_pipeline(
        spark,
        bootstrap,
        source,
        sink,
        tmp_path,
        columns=("key", "value"),
        read={**registry},  # no schema: the subject's latest (<topic>-value)
        write={**registry, "valueSchema": json.dumps(EVERY_TYPE)},  # registered: <sink>-value
    )
    query.awaitTermination(300)
    assert query.exception() is None

    records = drain(bootstrap, sink, isolation_level="read_committed")
    keys = sorted(int(r.key) for r in records)
    assert keys == list(range(ROWS)), "every input exactly once"
    decoder = AvroDecoder(parse(EVERY_TYPE), registry=SchemaRegistry(registry))
    decoded, corrupt = decoder.decode_column(
        [r.value for r in records], permissive=False, where=str
    )
    assert corrupt == [None] * ROWS
    by_key = dict(zip((int(r.key) for r in records), decoded.to_pylist(), strict=True))
    assert decoded.type == EXPECTED
    for i in range(ROWS):
        assert by_key[i] == order(i), f"row {i}"
    # Standard Confluent wire format: Confluent's own deserializer reads what the sink wrote.
    deserialize = AvroDeserializer(client)
    sink_context = SerializationContext(sink, MessageField.VALUE)
    assert deserialize(records[0].value, sink_context)["id"] == 2**40 + int(records[0].key)
    assert client.get_latest_version(f"{sink}-value").schema.schema_type == "AVRO"


V1 = {
    "type": "record",
    "name": "Reading",
    "fields": [
        {"name": "sensor", "type": "string"},
        {"name": "count", "type": "int"},
        {"name": "legacy", "type": "string"},
    ],
}
V2 = {
    "type": "record",
    "name": "Reading",
    "fields": [
        {"name": "sensor", "type": "string"},
        {"name": "count", "type": "long"},  # promoted
        {"name": "unit", "type": "string", "default": "celsius"},  # added, with a default
    ],  # legacy: dropped
}


def test_a_reader_schema_reads_older_records_raw_avro_and_avro_keys(
    spark: SparkSession, kafka: KafkaCluster
) -> None:
    register(spark)
    bootstrap = kafka.bootstrap_servers
    topic = create_topic(bootstrap, 1)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(3):
        value = _raw(V1, {"sensor": f"s{i}", "count": i, "legacy": "x"})
        producer.produce(topic, key=_raw("long", 2**35 + i), value=value)
    assert producer.flush(60) == 0
    frame = (
        spark.read.format("kafka-eos")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("keyFormat", "avro")
        .option("keySchema", '"long"')
        .option("valueFormat", "avro")
        .option("valueSchema", json.dumps(V2))
        .option("valueWriterSchema", json.dumps(V1))
        .load()
    )
    assert frame.schema["key"].dataType.simpleString() == "bigint"
    assert frame.schema["value"].dataType.simpleString() == (
        "struct<sensor:string,count:bigint,unit:string>"
    )
    rows = sorted(frame.select("key", "value.*").collect())
    assert [tuple(r) for r in rows] == [(2**35 + i, f"s{i}", i, "celsius") for i in range(3)]


def _malformed_topic(bootstrap: str) -> str:
    topic = create_topic(bootstrap, 1)
    good = _raw(V2, {"sensor": "a", "count": 1, "unit": "k"})
    _produce(bootstrap, topic, [good, b"\x07garbage", good, None])
    return topic


def _avro_read(spark: SparkSession, bootstrap: str, topic: str, **options: str):
    return (
        spark.read.format("kafka-eos")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("valueFormat", "avro")
        .option("valueSchema", json.dumps(V2))
        .options(**options)
        .load()
    )


def test_failfast_names_the_topic_partition_and_offset(
    spark: SparkSession, kafka: KafkaCluster
) -> None:
    register(spark)
    topic = _malformed_topic(kafka.bootstrap_servers)
    with pytest.raises(Exception) as caught:
        _avro_read(spark, kafka.bootstrap_servers, topic).collect()
    message = str(caught.value)
    assert "KAFKA_EOS.AVRO.MALFORMED_RECORD" in message
    assert f"topic {topic} partition 0 offset 1" in message
    assert "mode=PERMISSIVE" in message


def test_permissive_reads_nulls_and_keeps_the_bytes(
    spark: SparkSession, kafka: KafkaCluster
) -> None:
    register(spark)
    topic = _malformed_topic(kafka.bootstrap_servers)
    frame = _avro_read(spark, kafka.bootstrap_servers, topic, mode="PERMISSIVE")
    rows = sorted(frame.select("offset", "value", "_corrupt_value").collect())
    assert [(r.offset, r.value is None, r._corrupt_value) for r in rows] == [
        (0, False, None),
        (1, True, b"\x07garbage"),
        (2, False, None),
        (3, True, None),  # a null Kafka value is null, not corrupt
    ]
    assert rows[0].value.asDict() == {"sensor": "a", "count": 1, "unit": "k"}


NOT_NULL = {
    "type": "record",
    "name": "Reading",
    "fields": [{"name": "sensor", "type": "string"}, {"name": "count", "type": "long"}],
}


def test_a_value_that_does_not_fit_the_sink_schema_fails_and_writes_nothing(
    spark: SparkSession, kafka: KafkaCluster, tmp_path: Path
) -> None:
    register(spark)
    bootstrap = kafka.bootstrap_servers
    source, sink = create_topic(bootstrap, 1), create_topic(bootstrap, 1)
    nullable = {
        "type": "record",
        "name": "Reading",
        "fields": [
            {"name": "sensor", "type": ["null", "string"]},
            {"name": "count", "type": "long"},
        ],
    }
    values = [_raw(nullable, {"sensor": s, "count": 1}) for s in ("a", None, "c")]
    _produce(bootstrap, source, values)
    query = _avro_pipeline(
        spark,
        bootstrap,
        source,
        sink,
        tmp_path,
        columns=("value",),
        read={"valueSchema": json.dumps(nullable)},
        write={"valueSchema": json.dumps(NOT_NULL)},
    )
    with pytest.raises(StreamingQueryException) as caught:
        query.awaitTermination(300)
    assert "KAFKA_EOS.AVRO.VALUE_DOES_NOT_FIT" in str(caught.value)
    assert "field sensor of row 1 is null, but the Avro schema requires" in str(caught.value)
    assert drain(bootstrap, sink, isolation_level="read_committed") == []
    assert drain(bootstrap, sink, isolation_level="read_uncommitted") == [], (
        "the batch is encoded before any record is produced"
    )


def test_an_id_the_registry_does_not_know_is_a_malformed_value(
    spark: SparkSession, kafka: KafkaCluster, schema_registry: RegistryServer
) -> None:
    """Bytes that look framed but name no schema: PERMISSIVE keeps them aside; FAILFAST stops
    naming the id (a registry that does not answer at all fails both: tests/avro)."""
    register(spark)
    bootstrap = kafka.bootstrap_servers
    topic = create_topic(bootstrap, 1)
    _produce(bootstrap, topic, [b"\x00\x00\x0f\x42\x3f" + _raw(V2, {"sensor": "a", "count": 1})])
    options = {"schema.registry.url": schema_registry.url}
    rows = _avro_read(spark, bootstrap, topic, mode="PERMISSIVE", **options).collect()
    assert [(r.value, r._corrupt_value[:5]) for r in rows] == [(None, b"\x00\x00\x0f\x42\x3f")]
    with pytest.raises(Exception, match=r"KAFKA_EOS\.AVRO\.REGISTRY_FAILED.*schema id 999999"):
        _avro_read(spark, bootstrap, topic, **options).collect()
    # A URL without the API's path answers 404 too, but not the registry's "no such schema":
    # PERMISSIVE must not read every value as corrupt then.
    wrong = {"schema.registry.url": schema_registry.base_url}
    with pytest.raises(Exception, match=r"KAFKA_EOS\.AVRO\.REGISTRY_FAILED"):
        _avro_read(spark, bootstrap, topic, mode="PERMISSIVE", **wrong).collect()
