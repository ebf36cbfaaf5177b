"""Range planning: new, gone and truncated partitions; minPartitions and maxRecordsPerPartition."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connectors.kafka.source.errors import SourceOptionError
from connectors.kafka.source.offsets import PartitionKey
from connectors.kafka.source.ranges import OffsetRange, batch_ranges, plan_ranges, split_ranges


def test_new_partitions_start_at_zero_and_empty_ones_are_skipped() -> None:
    ranges, lost = plan_ranges(
        {("t", 0): 10, ("t", 1): 4}, {("t", 0): 20, ("t", 1): 4, ("u", 0): 3}
    )
    assert ranges == [OffsetRange("t", 0, 10, 20), OffsetRange("u", 0, 0, 3)]
    assert lost == []


def test_new_partitions_start_at_their_log_start_and_report_the_deleted_head_once() -> None:
    """As Spark's ``getOffsetRangesFromResolvedOffsets``: a new partition starts at its earliest
    offset; one above 0 is reported once, at planning ("Added partition ... starts from N
    instead of 0"), never again by each batch's task."""
    ranges, lost = plan_ranges(
        {("t", 0): 10}, {("t", 0): 20, ("u", 0): 1_000_050, ("v", 0): 7}, {("u", 0): 1_000_000}
    )
    assert ranges == [
        OffsetRange("t", 0, 10, 20),
        OffsetRange("u", 0, 1_000_000, 1_000_050),
        OffsetRange("v", 0, 0, 7),
    ]
    assert lost == [
        "u-0 appeared with its log starting at offset 1000000, not 0: offsets [0, 1000000) "
        "were deleted before they could be read"
    ]


def test_a_new_partition_whose_log_start_passed_the_end_plans_nothing() -> None:
    """A replay after retention moved the log start beyond the logged end: one loss, no range,
    and not a "went back" (the end is not below anything this query read)."""
    ranges, lost = plan_ranges({}, {("u", 0): 50}, {("u", 0): 80})
    assert ranges == []
    assert len(lost) == 1 and "u-0 appeared with its log starting at offset 80" in lost[0]


def test_gone_and_backwards_partitions_are_data_loss() -> None:
    ranges, lost = plan_ranges({("t", 0): 10, ("gone", 0): 5}, {("t", 0): 3})
    assert ranges == []
    assert len(lost) == 2
    assert "gone-0 is gone" in lost[0] and "offset 5" in lost[0]
    assert "t-0 went back from 10 to 3" in lost[1]


def test_split_for_min_partitions_is_proportional() -> None:
    big, small = OffsetRange("t", 0, 0, 900), OffsetRange("t", 1, 0, 100)
    pieces = split_ranges([big, small], min_partitions=10)
    assert [p.partition for p in pieces].count(0) == 9
    assert [p.partition for p in pieces].count(1) == 1
    assert [(p.start, p.end) for p in pieces if p.partition == 0][:2] == [(0, 100), (100, 200)]


def test_enough_ranges_are_not_split() -> None:
    ranges = [OffsetRange("t", p, 0, 1000) for p in range(4)]
    assert split_ranges(ranges, min_partitions=4) == ranges
    assert split_ranges(ranges) == ranges


def test_max_records_per_partition() -> None:
    pieces = split_ranges([OffsetRange("t", 0, 5, 30)], max_records_per_partition=10)
    assert [(p.start, p.end) for p in pieces] == [(5, 14), (14, 22), (22, 30)]


def test_ranges_are_never_cut_below_one_offset() -> None:
    pieces = split_ranges([OffsetRange("t", 0, 0, 2)], min_partitions=8)
    assert [(p.start, p.end) for p in pieces] == [(0, 1), (1, 2)]


@given(
    sizes=st.lists(st.integers(min_value=0, max_value=10_000), min_size=1, max_size=8),
    min_partitions=st.one_of(st.none(), st.integers(min_value=1, max_value=64)),
    max_records=st.one_of(st.none(), st.integers(min_value=1, max_value=5_000)),
)
def test_splitting_covers_every_offset_exactly_once(
    sizes: list[int], min_partitions: int | None, max_records: int | None
) -> None:
    ranges = [OffsetRange("t", p, 100, 100 + size) for p, size in enumerate(sizes)]
    pieces = split_ranges(ranges, min_partitions, max_records)
    for r in ranges:
        mine = [p for p in pieces if p.partition == r.partition]
        covered = [o for p in mine for o in range(p.start, p.end)]
        assert covered == list(range(r.start, r.end))
        assert all(p.size > 0 for p in mine)
        if max_records is not None:
            assert all(p.size <= max_records for p in mine)


def by_offsets(
    start: dict[PartitionKey, int],
    end: dict[PartitionKey, int],
    latest: dict[PartitionKey, int],
    fail_on_data_loss: bool = True,
) -> list[OffsetRange]:
    """:func:`batch_ranges` of a read bounded by startingOffsets and endingOffsets."""
    return batch_ranges(
        start,
        end,
        latest,
        starting="startingOffsets",
        ending="endingOffsets",
        end_by_timestamp=False,
        fail_on_data_loss=fail_on_data_loss,
    )


def test_batch_ranges() -> None:
    ranges = by_offsets(
        {("t", 0): 0, ("t", 1): 5}, {("t", 0): 10, ("t", 1): 5}, {("t", 0): 10, ("t", 1): 9}
    )
    assert ranges == [OffsetRange("t", 0, 0, 10), OffsetRange("t", 1, 5, 5)]


def test_batch_end_beyond_latest_fails_unless_found_by_timestamp() -> None:
    args = ({("t", 0): 0, ("t", 1): 0}, {("t", 0): 50, ("t", 1): 70}, {("t", 0): 40, ("t", 1): 60})
    with pytest.raises(SourceOptionError) as caught:
        by_offsets(*args)
    message = str(caught.value)
    # Every partition beyond, the latest offsets, and each way out.
    assert "endingOffsets='t-0=50, t-1=70'" in message
    assert "beyond the latest offsets t-0=40, t-1=60" in message
    assert "use -1 (latest)" in message and "failOnDataLoss=false" in message
    clamped = batch_ranges(
        *args, starting="startingOffsets", ending="endingTimestamp", end_by_timestamp=True
    )
    assert clamped == [OffsetRange("t", 0, 0, 40), OffsetRange("t", 1, 0, 60)]


def test_batch_end_beyond_latest_ends_there_without_fail_on_data_loss(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Spark's outcome with failOnDataLoss=false: the read ends at the latest offset."""
    with caplog.at_level(logging.WARNING):
        ranges = by_offsets(
            {("t", 0): 0, ("t", 1): 0},
            {("t", 0): 50, ("t", 1): 30},
            {("t", 0): 40, ("t", 1): 60},
            fail_on_data_loss=False,
        )
    assert ranges == [OffsetRange("t", 0, 0, 40), OffsetRange("t", 1, 0, 30)]
    assert "endingOffsets t-0=50 is beyond the latest offsets t-0=40" in caplog.text


def test_batch_start_after_end_fails() -> None:
    with pytest.raises(SourceOptionError, match=r"startingOffsets='t-0=30'.*after the end 20"):
        by_offsets({("t", 0): 30}, {("t", 0): 20}, {("t", 0): 40})
