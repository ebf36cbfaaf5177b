"""The Confluent wire format: magic byte, 4-byte schema id, Avro body."""

from __future__ import annotations

import pytest

from connectors.avro.wire import WireFormatError, frame, split


@pytest.mark.parametrize("schema_id", [0, 1, 258, 2**31 - 1])
def test_frame_and_split_round_trip(schema_id: int) -> None:
    framed = frame(schema_id, b"\x02body")
    assert framed[:1] == b"\x00" and len(framed) == 5 + len(b"\x02body")
    assert split(framed) == (schema_id, b"\x02body")


def test_an_empty_body_is_a_header_only() -> None:
    assert split(frame(3, b"")) == (3, b"")


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b"", r"a value of 0 bytes \(empty\) is too short"),
        (b"\x00\x00\x01", r"a value of 3 bytes \(000001\) is too short"),
        (b"\x02\x00\x00\x00\x01\x02", r"starts with byte 0x02, not .* magic byte 0x00"),
    ],
)
def test_garbled_input_is_a_clear_error(payload: bytes, message: str) -> None:
    with pytest.raises(WireFormatError, match=message) as raised:
        split(payload)
    assert raised.value.code == "KAFKA_EOS.AVRO.BAD_WIRE_FORMAT"
    assert "read it as raw Avro" in str(raised.value)


@pytest.mark.parametrize("schema_id", [-1, 2**31])
def test_an_id_outside_the_format_is_refused(schema_id: int) -> None:
    with pytest.raises(WireFormatError, match=f"schema id {schema_id} does not fit"):
        frame(schema_id, b"")
