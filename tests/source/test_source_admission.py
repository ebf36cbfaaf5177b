"""maxOffsetsPerTrigger across partitions, and minOffsetsPerTrigger with maxTriggerDelay."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from checkpoint.testing import ManualClock
from connectors.kafka.source.admission import (
    TriggerDelay,
    available_now_end,
    backlog,
    pin_latest,
    rate_limit,
    with_new_partitions,
)


def test_everything_fits_within_the_limit() -> None:
    latest = {("t", 0): 50, ("t", 1): 7}
    assert rate_limit({("t", 0): 40, ("t", 1): 7}, latest, 100) == latest


def test_shares_follow_the_backlog() -> None:
    end = rate_limit({("t", 0): 100, ("t", 1): 0}, {("t", 0): 1100, ("t", 1): 3000}, 400)
    assert end == {("t", 0): 200, ("t", 1): 300}


def test_a_small_partition_is_not_starved() -> None:
    end = rate_limit({}, {("big", 0): 1_000_000, ("small", 0): 3}, 100)
    assert end == {("big", 0): 99, ("small", 0): 1}


def test_never_more_than_the_limit_even_with_more_partitions_than_offsets() -> None:
    """Spark rounds each tiny share up and can admit 20 offsets for a limit of 10."""
    latest = {("t", p): 1 for p in range(20)}
    end = rate_limit({}, latest, 10)
    assert sum(end.values()) == 10


def test_partitions_without_backlog_keep_their_latest_even_if_lower() -> None:
    """A partition whose offsets went back is left for the planner to report as data loss."""
    end = rate_limit({("t", 0): 50, ("t", 1): 0}, {("t", 0): 20, ("t", 1): 500}, 10)
    assert end == {("t", 0): 20, ("t", 1): 10}


def test_new_partitions_count_from_their_log_start() -> None:
    """Spark's ``rateLimit`` counts a new partition from its earliest offset. Counted from 0,
    the new partition below would get 99 of the 100 offsets (all below its log start, so 0
    rows) and the live one 1, for about 1,000 batches."""
    start = with_new_partitions({("live", 0): 0}, {("new", 0): 1_000_000})
    latest = {("live", 0): 1000, ("new", 0): 1_001_000}
    assert backlog(start, latest) == {("live", 0): 1000, ("new", 0): 1000}
    assert rate_limit(start, latest, 100) == {("live", 0): 50, ("new", 0): 1_000_050}
    # Proportional to latest - earliest, as Spark's shares.
    start = with_new_partitions({("live", 0): 0}, {("new", 0): 500})
    latest = {("live", 0): 900, ("new", 0): 800}
    assert rate_limit(start, latest, 120) == {("live", 0): 90, ("new", 0): 530}


def test_with_new_partitions_never_moves_a_known_partition() -> None:
    start = {("t", 0): 5}
    assert with_new_partitions(start, {("t", 0): 9, ("t", 1): 3}) == {("t", 0): 5, ("t", 1): 3}
    assert with_new_partitions(start, {}) == start


@given(
    st.lists(st.tuples(st.integers(0, 2**62), st.integers(0, 10**6)), min_size=1, max_size=12),
    st.integers(min_value=1, max_value=10**6),
)
def test_budget_is_used_exactly_and_never_overshoots(
    partitions: list[tuple[int, int]], max_offsets: int
) -> None:
    start = {("t", p): first for p, (first, _) in enumerate(partitions)}
    latest = {("t", p): first + size for p, (first, size) in enumerate(partitions)}
    end = rate_limit(start, latest, max_offsets)
    admitted = [end[k] - start[k] for k in start]
    assert all(0 <= admitted[i] <= latest[k] - start[k] for i, k in enumerate(start))
    assert sum(admitted) == min(max_offsets, sum(latest[k] - start[k] for k in start))


def test_trigger_delay_waits_for_enough_offsets_or_the_delay() -> None:
    clock = ManualClock()
    delay = TriggerDelay(min_offsets=100, max_delay_s=60, clock=clock)
    assert delay.admit(0)  # the first trigger after a start, as in Spark
    clock.advance(10)
    assert not delay.admit(99)
    assert delay.admit(100)
    clock.advance(59)
    assert not delay.admit(1)
    clock.advance(1)
    assert delay.admit(1)  # 60 s since the last batch: go with what there is


def test_a_held_partition_has_no_backlog_and_keeps_its_start() -> None:
    """Held: left out of one metadata answer, deletion not confirmed; ``latest`` is its start."""
    start = {("t", 0): 0, ("t", 1): 40}
    latest = {("t", 0): 100, ("t", 1): 40}
    assert backlog(start, latest) == {("t", 0): 100}
    assert rate_limit(start, latest, 10) == {("t", 0): 10, ("t", 1): 40}
    assert available_now_end(start, {("t", 0): 90}, latest) == {("t", 0): 90, ("t", 1): 40}


def test_latest_is_not_pinned_while_a_partition_to_pin_is_held() -> None:
    start = {("t", 0): -1, ("t", 1): -1}
    assert pin_latest(start, {("t", 0): 500, ("t", 1): -1}) == start
    assert pin_latest(start, {("t", 0): 500}) == {("t", 0): 500}  # t-1 confirmed deleted
