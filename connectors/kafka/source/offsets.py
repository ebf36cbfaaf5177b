"""Per-partition offsets and their JSON form: Spark's offset log entry and the offset options.

The streaming offset is Spark's built-in Kafka format, ``{"topic": {"0": 42, "1": 7}}``: the
next offset to read per partition, i.e. the source's snapshot. Spark keeps it in its offset log
and compares offsets by their JSON text, so :func:`to_json_dict` always orders topics and
partitions the same way: equal offsets must give equal text or an idle query would run empty
batches forever.

Format version 1 carries no version field (it is Spark's format). A later version would add a
key starting with ``$``, which no topic name can contain; this release rejects such keys with
:class:`UnsupportedFormatVersion` instead of misreading them.

>>> to_json_dict({("t", 10): 5, ("t", 2): 0})
{'t': {'2': 0, '10': 5}}
>>> from_json_dict({"t": {"2": 0, "10": 5}}, what="the offset log")
{('t', 2): 0, ('t', 10): 5}
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping

from checkpoint.errors import FormatError, UnsupportedFormatVersion
from connectors.kafka.source.errors import SourceOptionError
from connectors.options import is_digits

PartitionKey = tuple[str, int]
"""``(topic, partition)``: a plain tuple so that it pickles small and sorts naturally."""
PartitionOffsets = dict[PartitionKey, int]

# Spark's (and Kafka's ListOffsets) special values in offset JSON options.
EARLIEST = -2
LATEST = -1
OFFSET_FORMAT_VERSIONS = (1,)

# Kafka's rule for topic names (kafka.common.internals.Topic): at most 249 of these characters.
_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def describe(key: PartitionKey) -> str:
    """``topic-0``: how Kafka's own tools name a topic-partition in messages."""
    return f"{key[0]}-{key[1]}"


def render(keys: Iterable[PartitionKey] | Mapping[PartitionKey, int]) -> str:
    """``t-0, t-1`` or ``t-0=5, t-1=7``: partitions the way Kafka's tools print them."""
    if isinstance(keys, Mapping):
        return ", ".join(f"{describe(k)}={v}" for k, v in sorted(keys.items())) or "none"
    return ", ".join(describe(k) for k in sorted(keys)) or "none"


def is_topic_name(name: str) -> bool:
    return _TOPIC.fullmatch(name) is not None


def to_json_dict(offsets: Mapping[PartitionKey, int]) -> dict[str, dict[str, int]]:
    """Spark's offset form, canonically ordered (topics by name, partitions by number)."""
    result: dict[str, dict[str, int]] = {}
    for topic, partition in sorted(offsets):
        result.setdefault(topic, {})[str(partition)] = offsets[(topic, partition)]
    return result


def from_json_dict(data: object, *, what: str, symbolic: bool = False) -> PartitionOffsets:
    """Read an offset written by :func:`to_json_dict`; ``what`` says where it came from.

    ``symbolic`` admits -1 (:data:`LATEST`): a start from ``initialOffset`` whose "latest" is
    not pinned yet. Ends in Spark's offset log are always concrete.
    """
    if not isinstance(data, dict):
        raise FormatError(f"{what}: expected a JSON object of topics, got {data!r}")
    offsets: PartitionOffsets = {}
    for topic, partitions in data.items():
        if isinstance(topic, str) and topic.startswith("$"):
            raise UnsupportedFormatVersion(
                f"kafka-eos source offset ({what})", topic, OFFSET_FORMAT_VERSIONS
            )
        if not isinstance(topic, str) or not is_topic_name(topic):
            raise FormatError(f"{what}: {topic!r} is not a Kafka topic name")
        if not isinstance(partitions, dict):
            raise FormatError(f"{what}: topic {topic!r} maps to {partitions!r}, not an object")
        for partition, offset in partitions.items():
            if not (isinstance(partition, str) and is_digits(partition)):
                raise FormatError(f"{what}: partition {partition!r} of {topic!r} is not a number")
            if type(offset) is not int or not (offset >= 0 or (symbolic and offset == LATEST)):
                raise FormatError(f"{what}: offset {offset!r} of {topic}-{partition} is invalid")
            offsets[(topic, int(partition))] = offset
    return offsets


def parse_offsets_option(option: str, text: str, *, allowed: str, example: str) -> PartitionOffsets:
    """Parse an offsets-by-partition option such as ``startingOffsets={"t":{"0":-2}}``.

    Values are checked by the caller (which specials are allowed depends on the option);
    ``allowed`` and ``example`` go into the error so that it says how to fix the value.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SourceOptionError(option, text, f"not JSON ({exc}); expected {example}") from exc
    fix = f"expected a JSON object of topic -> {{partition: {allowed}}}, e.g. {example}"
    if not isinstance(data, dict) or not data:
        raise SourceOptionError(option, text, fix)
    offsets: PartitionOffsets = {}
    for topic, partitions in data.items():
        if not is_topic_name(topic) or not isinstance(partitions, dict) or not partitions:
            raise SourceOptionError(option, text, fix)
        for partition, value in partitions.items():
            if not is_digits(partition) or type(value) is not int:
                raise SourceOptionError(option, text, fix)
            offsets[(topic, int(partition))] = value
    return offsets


def parse_assign(text: str) -> tuple[PartitionKey, ...]:
    """``assign={"t":[0,1]}``: the fixed topic-partitions to read, sorted."""
    fix = 'expected a JSON object of topic -> list of partition numbers, e.g. {"orders":[0,1]}'
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SourceOptionError("assign", text, f"not JSON ({exc}); {fix}") from exc
    if not isinstance(data, dict) or not data:
        raise SourceOptionError("assign", text, fix)
    keys: set[PartitionKey] = set()
    for topic, partitions in data.items():
        if not is_topic_name(topic) or not isinstance(partitions, list) or not partitions:
            raise SourceOptionError("assign", text, fix)
        for partition in partitions:
            if type(partition) is not int or partition < 0:
                raise SourceOptionError("assign", text, fix)
            keys.add((topic, partition))
    return tuple(sorted(keys))
