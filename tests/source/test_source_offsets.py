"""The streaming offset (Spark's offset log entry) and the offset options' JSON."""

from __future__ import annotations

import json

import pytest

from checkpoint.errors import FormatError, UnsupportedFormatVersion
from connectors.kafka.source.errors import SourceOptionError
from connectors.kafka.source.offsets import from_json_dict, parse_assign, to_json_dict


def test_round_trip_through_spark_json_text() -> None:
    offsets = {("b", 10): 7, ("a", 2): 0, ("b", 2): 3}
    text = json.dumps(to_json_dict(offsets))
    assert from_json_dict(json.loads(text), what="test") == offsets


def test_equal_offsets_give_equal_text_whatever_the_insertion_order() -> None:
    """Spark compares offsets by their JSON text: a different order would look like new data."""
    one = {("b", 10): 7, ("a", 2): 0, ("b", 2): 3}
    other = dict(reversed(list(one.items())))
    assert json.dumps(to_json_dict(one)) == json.dumps(to_json_dict(other))
    assert json.dumps(to_json_dict(one)) == '{"a": {"2": 0}, "b": {"2": 3, "10": 7}}'


def test_empty_offset_is_an_empty_object() -> None:
    """A subscription whose topics do not exist yet starts from no partitions."""
    assert to_json_dict({}) == {}
    assert from_json_dict({}, what="test") == {}


@pytest.mark.parametrize(
    "data",
    [
        [1, 2],
        {"bad topic!": {"0": 1}},
        {"t": [1]},
        {"t": {"zero": 1}},
        {"t": {"0": -1}},
        {"t": {"0": "5"}},
        {"t": {"0": True}},
    ],
)
def test_damaged_offsets_are_rejected(data: object) -> None:
    with pytest.raises(FormatError, match="offset log"):
        from_json_dict(data, what="the offset log")


def test_a_future_format_is_rejected_not_misread() -> None:
    with pytest.raises(UnsupportedFormatVersion, match=r"reads versions \[1\]"):
        from_json_dict({"$format": 2, "t": {"0": 1}}, what="the offset log")


def test_assign_json() -> None:
    assert parse_assign('{"t": [2, 0, 2]}') == (("t", 0), ("t", 2))
    for bad in ('{"t": []}', '{"t": [-1]}', "[]", '{"t": ["0"]}', '{"": [0]}'):
        with pytest.raises(SourceOptionError, match="assign="):
            parse_assign(bad)


def test_only_a_start_from_initial_offset_may_hold_symbolic_latest() -> None:
    assert from_json_dict({"t": {"0": -1}}, what="start", symbolic=True) == {("t", 0): -1}
    with pytest.raises(FormatError, match="offset -1 of t-0 is invalid"):
        from_json_dict({"t": {"0": -1}}, what="the offset log")
    with pytest.raises(FormatError, match="offset -2 of t-0 is invalid"):
        from_json_dict({"t": {"0": -2}}, what="start", symbolic=True)
