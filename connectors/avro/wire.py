"""The Confluent wire format: a magic byte 0, the schema's registry id in 4 big-endian bytes,
then the Avro body (the schemaless encoding of one datum).

>>> frame(7, b"\\x02a")
b'\\x00\\x00\\x00\\x00\\x07\\x02a'
>>> split(b"\\x00\\x00\\x00\\x00\\x07\\x02a")
(7, b'\\x02a')
"""

from __future__ import annotations

from checkpoint.errors import KafkaEosError

MAGIC = 0
HEADER_BYTES = 5
_MAX_ID = 2**31 - 1  # the registry's ids are Java ints


class WireFormatError(KafkaEosError, ValueError):
    """A value is not in the Confluent wire format: too short, or no magic byte 0."""

    code = "KAFKA_EOS.AVRO.BAD_WIRE_FORMAT"


def split(payload: bytes) -> tuple[int, bytes]:
    """The schema id and the Avro body of a framed value."""
    if len(payload) < HEADER_BYTES:
        raise WireFormatError(
            f"a value of {len(payload)} bytes ({payload[:HEADER_BYTES].hex() or 'empty'}) is "
            f"too short for the Confluent wire format, whose header alone is {HEADER_BYTES} "
            "bytes (magic byte 0, 4-byte schema id). Was it written without a schema registry? "
            "Then read it as raw Avro"
        )
    if payload[0] != MAGIC:
        raise WireFormatError(
            f"a value starts with byte {payload[0]:#04x}, not the Confluent wire format's magic "
            f"byte 0x00 (first bytes: {payload[:8].hex()}). Was it written without a schema "
            "registry, or with another serializer? Then read it as raw Avro"
        )
    return int.from_bytes(payload[1:HEADER_BYTES], "big"), payload[HEADER_BYTES:]


def frame(schema_id: int, body: bytes) -> bytes:
    """``body`` behind the header that names ``schema_id``."""
    if not 0 <= schema_id <= _MAX_ID:
        raise WireFormatError(
            f"schema id {schema_id} does not fit the Confluent wire format (0 to {_MAX_ID}): "
            "use the id the schema registry gave"
        )
    return bytes((MAGIC,)) + schema_id.to_bytes(4, "big") + body
