"""Offset ranges: what one Spark task reads, planned on the driver from a batch's start and end.

Pure logic, no Kafka: :func:`plan_ranges` turns two offset snapshots into one range per
partition (and says which offsets are lost), :func:`split_ranges` cuts them up for
``minPartitions`` and ``maxRecordsPerPartition`` the way Spark's ``KafkaOffsetRangeCalculator``
does.

>>> ranges, lost = plan_ranges({("t", 0): 10}, {("t", 0): 40, ("t", 1): 5})
>>> [(r.partition, r.start, r.end) for r in ranges], lost
([(0, 10, 40), (1, 0, 5)], [])
>>> [(r.start, r.end) for r in split_ranges(ranges[:1], min_partitions=3)]
[(10, 20), (20, 30), (30, 40)]
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from connectors.kafka.source.errors import SourceOptionError
from connectors.kafka.source.offsets import PartitionKey, describe, render

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OffsetRange:
    """Offsets ``[start, end)`` of one partition. Sent to executors, so it stays this small.

    Under ``read_committed`` some of these offsets are aborted records or transaction markers
    that a consumer never returns, so ``size`` counts offsets, not rows.
    """

    topic: str
    partition: int
    start: int
    end: int

    @property
    def key(self) -> PartitionKey:
        return (self.topic, self.partition)

    @property
    def size(self) -> int:
        return self.end - self.start


def plan_ranges(
    start: Mapping[PartitionKey, int],
    end: Mapping[PartitionKey, int],
    earliest: Mapping[PartitionKey, int] | None = None,
) -> tuple[list[OffsetRange], list[str]]:
    """The non-empty ranges from ``start`` to ``end``, and a description of each data loss.

    A partition in ``end`` but not in ``start`` appeared since (partitions added, or a new
    topic matching ``subscribePattern``): it is read from its earliest offset in ``earliest``
    (its log start, looked up when the batch is planned; 0 if left out), as in Spark's
    ``getOffsetRangesFromResolvedOffsets``. An earliest offset above 0 means retention or
    ``delete_records`` removed records before the query could read them: reported once, here,
    as Spark does ("Added partition ... starts from N instead of 0"). A partition in ``start``
    but not in ``end`` is gone, and one whose end is below its start was truncated or
    recreated: both lose data, which the caller reports according to ``failOnDataLoss``.

    So an end must leave a partition of its start out only when its deletion is confirmed:
    the stream reader's ends come from ``KafkaOffsetReader.latest_since``, which keeps a
    partition that one metadata answer left out at its start offset (never dropped, and so
    never read again from its log start as a new partition).
    """
    earliest = earliest or {}
    lost = [
        f"{describe(key)} is gone (its topic was deleted); it had been read up to offset "
        f"{start[key]}"
        for key in sorted(start.keys() - end.keys())
    ]
    ranges: list[OffsetRange] = []
    for key in sorted(end):
        if key in start:
            first = start[key]
        else:
            first = max(earliest.get(key, 0), 0)
            if first > 0:
                lost.append(
                    f"{describe(key)} appeared with its log starting at offset {first}, not 0: "
                    f"offsets [0, {first}) were deleted before they could be read"
                )
        if end[key] < first and key in start:
            lost.append(
                f"the offsets of {describe(key)} went back from {first} to {end[key]} (the "
                "topic was recreated or its log truncated); offsets below the new end are skipped"
            )
        elif end[key] > first:
            ranges.append(OffsetRange(key[0], key[1], first, end[key]))
    return ranges, lost


def batch_ranges(
    start: Mapping[PartitionKey, int],
    end: Mapping[PartitionKey, int],
    latest: Mapping[PartitionKey, int],
    *,
    starting: str,
    ending: str,
    end_by_timestamp: bool,
    fail_on_data_loss: bool = True,
) -> list[OffsetRange]:
    """The ranges of a batch query (``spark.read``), whose bounds come from the options named
    ``starting`` and ``ending``: impossible bounds are the user's to fix, so they fail.

    An end found by timestamp may lie in a transaction still open, beyond the last stable
    offset: it is lowered to ``latest``. An explicit end beyond ``latest`` names offsets that
    do not exist yet. Spark's tasks wait ``kafkaConsumer.pollTimeoutMs`` for them, then fail
    with a data-loss error, or, with ``failOnDataLoss=false``, end at the latest offset. Here
    it fails at once, naming every such partition, or with ``failOnDataLoss=false`` ends there
    too, with a warning.
    """
    beyond = {
        key: offset
        for key, offset in sorted(end.items())
        if offset > latest[key] and not end_by_timestamp
    }
    if beyond and fail_on_data_loss:
        raise SourceOptionError(
            ending,
            render(beyond),
            f"beyond the latest offsets {render({key: latest[key] for key in beyond})} (under "
            "read_committed the last stable offsets, before any open transaction): those "
            "offsets do not exist yet. End at or below them, use -1 (latest) for these "
            "partitions, or set failOnDataLoss=false to end them at their latest offset",
        )
    if beyond:
        _log.warning(
            "kafka-eos source: %s %s is beyond the latest offsets %s; ending there because "
            "failOnDataLoss=false",
            ending,
            render(beyond),
            render({key: latest[key] for key in beyond}),
        )
    ranges: list[OffsetRange] = []
    for key in sorted(end):
        last = min(end[key], latest[key]) if end_by_timestamp or key in beyond else end[key]
        if start[key] > last:
            raise SourceOptionError(
                starting,
                f"{describe(key)}={start[key]}",
                f"it is after the end {last} ({ending}); start at or before the end",
            )
        ranges.append(OffsetRange(key[0], key[1], start[key], last))
    return ranges


def split_ranges(
    ranges: Sequence[OffsetRange],
    min_partitions: int | None = None,
    max_records_per_partition: int | None = None,
) -> list[OffsetRange]:
    """Cut ranges so that no task reads more than ``max_records_per_partition`` offsets and,
    when there are fewer ranges than ``min_partitions``, large partitions are read by several
    tasks in parallel (each range gets a share of tasks proportional to its size)."""
    result = [r for r in ranges if r.size > 0]
    if max_records_per_partition is not None:
        result = [
            piece for r in result for piece in _divide(r, -(-r.size // max_records_per_partition))
        ]
    if min_partitions is not None and 0 < len(result) < min_partitions:
        total = sum(r.size for r in result)
        # size * min_partitions / total, rounded half up as Spark's Math.round, in integers.
        result = [
            piece
            for r in result
            for piece in _divide(r, (2 * r.size * min_partitions + total) // (2 * total))
        ]
    return result


def _divide(offset_range: OffsetRange, parts: int) -> list[OffsetRange]:
    """``parts`` contiguous pieces whose sizes differ by at most one offset."""
    parts = max(1, min(parts, offset_range.size))
    step, extra = divmod(offset_range.size, parts)
    pieces: list[OffsetRange] = []
    first = offset_range.start
    for index in range(parts):
        last = first + step + (1 if index < extra else 0)
        pieces.append(OffsetRange(offset_range.topic, offset_range.partition, first, last))
        first = last
    return pieces
