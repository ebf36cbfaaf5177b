"""How fast the Avro codec turns Arrow rows into Kafka values and back, on one core, with no
Kafka and no Spark: a 20-field record, raw and in the Confluent wire format.

The wire format's registry is a stub that knows the one schema (id 1): a registry answers once
per id and process, so a server adds nothing per record; what the framed numbers add is the
header, written and split per record.

``python -m kafka_eos.bench_avro --records 200000`` prints the records per second as JSON.
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
from connectors.avro.schema import Schema, load_schema

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


class _OneSchema(SchemaRegistry):
    """A registry that knows one schema, as id 1, without a server."""

    def __init__(self, schema: Schema) -> None:
        super().__init__({"url": "http://bench.invalid"})
        self._schema = schema

    def writer_schema(self, schema_id: int) -> Schema:
        return self._schema

    def register(self, subject: str, schema: Schema) -> int:
        return 1


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


def bench_avro(records: int) -> dict[str, Any]:
    """Records per second of encoding and decoding ``records`` rows (median of 3 runs)."""
    schema = load_schema(SCHEMA)
    encoder = AvroEncoder(schema)
    column = pa.array([_row(i) for i in range(records)], type=encoder.arrow_type)
    framing = AvroEncoder(schema, registry=_OneSchema(schema), subject="bench-value")
    raw, framed = encoder.encode_column(column), framing.encode_column(column)

    def decode(decoder: AvroDecoder, values: list[bytes | None]) -> pa.Array:
        return decoder.decode_column(values, permissive=False, where=str)[0]

    assert decode(AvroDecoder(schema), raw).equals(column)
    wire_decoder = AvroDecoder(schema, registry=_OneSchema(schema))
    return {
        "records": records,
        "fields": len(_FIELDS),
        "bytes_per_record": round(sum(map(len, raw)) / records),  # type: ignore[arg-type]
        "encode_raw_per_s": _median_rate(records, lambda: encoder.encode_column(column)),
        "decode_raw_per_s": _median_rate(records, lambda: decode(AvroDecoder(schema), raw)),
        "encode_framed_per_s": _median_rate(records, lambda: framing.encode_column(column)),
        "decode_framed_per_s": _median_rate(records, lambda: decode(wire_decoder, framed)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    print(json.dumps(bench_avro(parser.parse_args().records), indent=2))


if __name__ == "__main__":
    main()
