"""The Avro codec side by side with Confluent's own serializer and deserializer, on one core:
a 20-field record, raw and in the Confluent wire format, through a real schema registry
(Apicurio, started by the bench). No Kafka and no Spark: what a task spends per record.

Both sides start and end where a task does: an Arrow column (what Spark hands the sink and
what the source hands Spark). Confluent's serdes work per record on Python values, so their
timing includes ``to_pylist`` before serializing and ``pa.array`` after deserializing. A
registry answers once per id and process; the per-record cost is the codec's.

``kafka-eos bench --suite avro`` writes the report; ``python -m kafka_eos.bench.avro
--records 200000`` prints the numbers as JSON.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import time
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pyarrow as pa

from connectors.avro.codec import AvroDecoder, AvroEncoder
from connectors.avro.registry import SchemaRegistry
from connectors.avro.schema import load_schema

_RUNS = 3
_FIELDS: list[dict[str, Any]] = [
    *({"name": f"s{i}", "type": "string"} for i in range(5)),
    *({"name": f"l{i}", "type": "long"} for i in range(5)),
    *({"name": f"d{i}", "type": "double"} for i in range(4)),
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "flag", "type": "boolean"},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {
        "name": "amount",
        "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2},
    },
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
]
SCHEMA = json.dumps({"type": "record", "name": "Bench", "fields": _FIELDS})


def _row(i: int) -> dict[str, Any]:
    at = dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=i)
    return {
        **{f"s{k}": f"value-{k}-{i}" for k in range(5)},
        **{f"l{k}": i * (k + 1) for k in range(5)},
        **{f"d{k}": i / (k + 1) for k in range(4)},
        "note": None if i % 2 else "paid by card",
        "flag": i % 3 == 0,
        "at": at,
        "amount": Decimal(i % 100_000) / 100,
        "status": "PAID" if i % 2 else "NEW",
        "tags": ["a", "b"][: i % 3],
    }


def _median_rate(records: int, work: Callable[[], object]) -> float:
    times = []
    for _ in range(_RUNS):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return round(records / statistics.median(times))


def bench_avro(records: int, registry_url: str) -> dict[str, Any]:
    """Records per second of each way to encode and decode ``records`` rows (median of 3)."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    schema = load_schema(SCHEMA)
    raw_encoder = AvroEncoder(schema)
    column = pa.array([_row(i) for i in range(records)], type=raw_encoder.arrow_type)
    registry = SchemaRegistry({"url": registry_url})
    framed_encoder = AvroEncoder(schema, registry=registry, subject="bench-value")
    raw, framed = raw_encoder.encode_column(column), framed_encoder.encode_column(column)
    framed_decoder = AvroDecoder(schema, registry=registry)

    def decode(decoder: AvroDecoder, values: list[bytes | None]) -> pa.Array:
        return decoder.decode_column(values, permissive=False, where=str)[0]

    assert decode(AvroDecoder(schema), raw).equals(column)
    assert decode(framed_decoder, framed).equals(column)

    client = SchemaRegistryClient({"url": registry_url})
    context = SerializationContext("bench", MessageField.VALUE)
    # The id ours registered: the latest version of the subject.
    latest = {"auto.register.schemas": False, "use.latest.version": True}
    serialize = AvroSerializer(client, SCHEMA, conf=latest)
    deserialize = AvroDeserializer(client, SCHEMA)

    def confluent_encode() -> list[bytes | None]:
        return [serialize(row, context) for row in column.to_pylist()]

    def confluent_decode() -> pa.Array:
        return pa.array([deserialize(v, context) for v in framed], type=column.type)

    assert confluent_encode() == framed, "both write the same Confluent wire format"
    assert confluent_decode().equals(column)
    return {
        "records": records,
        "fields": len(_FIELDS),
        "bytes_per_record": round(sum(map(len, raw)) / records),  # type: ignore[arg-type]
        "encode_raw_per_s": _median_rate(records, lambda: raw_encoder.encode_column(column)),
        "decode_raw_per_s": _median_rate(records, lambda: decode(AvroDecoder(schema), raw)),
        "encode_framed_per_s": _median_rate(records, lambda: framed_encoder.encode_column(column)),
        "decode_framed_per_s": _median_rate(records, lambda: decode(framed_decoder, framed)),
        "confluent_encode_per_s": _median_rate(records, confluent_encode),
        "confluent_decode_per_s": _median_rate(records, confluent_decode),
    }


def render(result: dict[str, Any], command: str) -> str:
    """The report's section: each way's records/s, ours as a ratio to Confluent's serdes."""
    enc, dec = result["confluent_encode_per_s"], result["confluent_decode_per_s"]
    rows = [
        ("ours, raw Avro", result["encode_raw_per_s"], result["decode_raw_per_s"]),
        (
            "ours, Confluent wire format",
            result["encode_framed_per_s"],
            result["decode_framed_per_s"],
        ),
        ("Confluent's AvroSerializer / AvroDeserializer", enc, dec),
    ]
    lines = [
        "## Avro: encode and decode",
        "",
        f"`{command}`: {result['records']:,} records of {result['fields']} fields "
        f"({result['bytes_per_record']} bytes of Avro each), one core, median of 3 runs; from "
        "and to an Arrow column, as in a task. The registry is a real Apicurio 3.0.9.",
        "",
        "| codec | encode records/s | vs Confluent | decode records/s | vs Confluent |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, encode, decode in rows:
        lines.append(
            f"| {name} | {encode:,} | {encode / enc:.2f}x | {decode:,} | {decode / dec:.2f}x |"
        )
    return "\n".join(lines) + "\n"


def run(records: int, command: str) -> str:
    """Start a registry, measure, stop it: the ``--suite avro`` section."""
    from kafka_eos.cluster.registry import SchemaRegistry as RegistryServer

    with RegistryServer() as server:
        return render(bench_avro(records, server.url), command)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    from kafka_eos.cluster.registry import SchemaRegistry as RegistryServer

    with RegistryServer() as server:
        print(json.dumps(bench_avro(parser.parse_args().records, server.url), indent=2))


if __name__ == "__main__":
    main()
