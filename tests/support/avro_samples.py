"""Schemas and rows shared by the Avro tests: one schema with every type issue 17 lists."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from typing import Any

import pyarrow as pa

EVERY_TYPE = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "qty", "type": "int"},
        {"name": "ok", "type": "boolean"},
        {"name": "ratio", "type": "float"},
        {"name": "price", "type": "double"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "DONE"]}},
        {"name": "digest", "type": {"type": "fixed", "name": "Digest", "size": 4}},
        {"name": "blob", "type": "bytes"},
        {
            "name": "amount",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2},
        },
        {
            "name": "tax",
            "type": {
                "type": "fixed",
                "name": "Tax",
                "size": 8,
                "logicalType": "decimal",
                "precision": 12,
                "scale": 3,
            },
        },
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "at_ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "at_us", "type": [{"type": "long", "logicalType": "timestamp-micros"}, "null"]},
        {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "uid", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "tod", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "counts", "type": {"type": "map", "values": "long"}},
        {
            "name": "customer",
            "type": {
                "type": "record",
                "name": "Customer",
                "fields": [
                    {"name": "name", "type": "string"},
                    {"name": "tags", "type": {"type": "array", "items": "string"}},
                ],
            },
        },
        {
            "name": "lines",
            "type": {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": "Line",
                    "fields": [
                        {"name": "sku", "type": "string"},
                        {"name": "state", "type": "Status"},
                        {"name": "scores", "type": {"type": "map", "values": ["null", "double"]}},
                    ],
                },
            },
        },
        {"name": "previous", "type": ["null", "Customer"], "default": None},
        {"name": "size", "type": ["null", "int", "long"], "default": None},
    ],
}

UTC_US = pa.timestamp("us", tz="UTC")
CUSTOMER = pa.struct(
    [pa.field("name", pa.string(), False), pa.field("tags", pa.list_(pa.string()), False)]
)
EXPECTED = pa.struct(
    [
        pa.field("id", pa.int64(), False),
        pa.field("qty", pa.int32(), False),
        pa.field("ok", pa.bool_(), False),
        pa.field("ratio", pa.float32(), False),
        pa.field("price", pa.float64(), False),
        pa.field("note", pa.string(), True),
        pa.field("status", pa.string(), False),
        pa.field("digest", pa.binary(), False),
        pa.field("blob", pa.binary(), False),
        pa.field("amount", pa.decimal128(10, 2), False),
        pa.field("tax", pa.decimal128(12, 3), False),
        pa.field("day", pa.date32(), False),
        pa.field("at_ms", UTC_US, False),
        pa.field("at_us", UTC_US, True),
        pa.field("local", pa.timestamp("us"), False),
        pa.field("uid", pa.string(), False),
        pa.field("tod", pa.int32(), False),
        pa.field("counts", pa.map_(pa.string(), pa.int64()), False),
        pa.field("customer", CUSTOMER, False),
        pa.field(
            "lines",
            pa.list_(
                pa.struct(
                    [
                        pa.field("sku", pa.string(), False),
                        pa.field("state", pa.string(), False),
                        pa.field("scores", pa.map_(pa.string(), pa.float64()), False),
                    ]
                )
            ),
            False,
        ),
        pa.field("previous", CUSTOMER, True),
        pa.field("size", pa.int64(), True),
    ]
)


def order(i: int) -> dict[str, Any]:
    """Row ``i`` of EVERY_TYPE as Arrow's ``to_pylist`` gives it (maps as pairs)."""
    at = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.UTC) + dt.timedelta(milliseconds=i * 1001)
    customer = {"name": f"c{i}", "tags": ["vip", "eu"][: i % 3]}
    return {
        "id": 2**40 + i,
        "qty": -i,
        "ok": i % 2 == 0,
        "ratio": 0.5,
        "price": 19.99 + i,
        "note": None if i % 2 else f"note {i}",
        "status": "DONE" if i % 2 else "NEW",
        "digest": i.to_bytes(4, "big"),
        "blob": b"\x00\xff" * i,
        "amount": Decimal(f"{i}.25"),
        "tax": Decimal("-1.125"),
        "day": dt.date(2024, 2, 29) + dt.timedelta(days=i),
        "at_ms": at,
        "at_us": None if i % 3 == 0 else at + dt.timedelta(microseconds=7),
        "local": dt.datetime(2024, 1, 1, 8, 30, 0, 123456),
        "uid": str(uuid.UUID(int=i)),
        "tod": 45_296_789,
        "counts": [("a", 1), ("b", -(2**40))][: i % 3],
        "customer": customer,
        "lines": [
            {"sku": "s1", "state": "DONE", "scores": [("x", 1.5), ("y", None)]},
            {"sku": "s2", "state": "NEW", "scores": []},
        ][: i % 3],
        "previous": None if i % 2 else customer,
        "size": None if i % 4 == 0 else i * 2**33,
    }
