"""Admission control: how far one micro-batch may read (``maxOffsetsPerTrigger``) and whether
it should wait for more data (``minOffsetsPerTrigger`` with ``maxTriggerDelay``).

Pure logic on offset snapshots, run on the driver in ``latestOffset``. Budgets count offsets,
not rows, as in Spark: under ``read_committed`` aborted records and transaction markers use
offsets but yield no rows, so a batch never has more rows than its budget.

>>> rate_limit({("t", 0): 0, ("t", 1): 0}, {("t", 0): 900, ("t", 1): 100}, 10)
{('t', 0): 9, ('t', 1): 1}
>>> rate_limit({("t", 0): 0, ("t", 1): 0}, {("t", 0): 10**6, ("t", 1): 10}, 100)
{('t', 0): 99, ('t', 1): 1}
>>> pin_latest({("t", 0): -1, ("t", 1): 7}, {("t", 0): 500, ("t", 1): 90})
{('t', 0): 500, ('t', 1): 7}
>>> pin_latest({("t", 0): -1, ("t", 1): 7}, {("t", 0): -1, ("t", 1): 90})
{('t', 0): -1, ('t', 1): 7}
>>> available_now_end({("t", 0): 60}, {("t", 0): 50, ("t", 1): 5}, {("t", 0): 70, ("t", 1): 9})
{('t', 0): 60, ('t', 1): 5}
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from checkpoint.deadline import Clock
from connectors.kafka.source.offsets import LATEST, PartitionKey, PartitionOffsets


def backlog(
    start: Mapping[PartitionKey, int], latest: Mapping[PartitionKey, int]
) -> dict[PartitionKey, int]:
    """Offsets available per partition; one held at its start (``latest`` equal to it) counts
    nothing. A partition new since the batch start counts from its log start, as in Spark: the
    caller puts it in ``start`` at its earliest offset (:func:`with_new_partitions`); one left
    out counts from 0."""
    sizes = {key: end - start.get(key, 0) for key, end in latest.items()}
    return {key: size for key, size in sizes.items() if size > 0}


def with_new_partitions(
    start: Mapping[PartitionKey, int], earliest: Mapping[PartitionKey, int]
) -> PartitionOffsets:
    """``start`` with the partitions new since it at their earliest offsets (log starts): where
    a batch reads them from (:func:`~connectors.kafka.source.ranges.plan_ranges`), and so where
    their backlog counts from. Spark's ``rateLimit`` fetches the same earliest offsets. Counted from
    0 instead, a new partition whose log starts at 1,000,000 would take nearly the whole
    ``maxOffsetsPerTrigger`` budget for offsets that no longer exist.

    >>> with_new_partitions({("t", 0): 5}, {("t", 1): 1_000_000})
    {('t', 1): 1000000, ('t', 0): 5}
    """
    return {**{key: offset for key, offset in earliest.items() if key not in start}, **start}


def rate_limit(
    start: Mapping[PartitionKey, int], latest: Mapping[PartitionKey, int], max_offsets: int
) -> PartitionOffsets:
    """End offsets admitting at most ``max_offsets`` offsets in total, shared by backlog.

    Step 1: a partition whose proportional share is below one offset gets one (largest backlog
    first, while the budget lasts), so that it is not starved behind a large partition. Spark
    rounds such shares up too, but can then exceed the budget; this never does.
    Step 2: the rest of the budget goes to the other partitions in proportion to their
    backlogs, by largest remainder, in integers so that offsets near 2**63 stay exact.
    """
    sizes = backlog(start, latest)
    total = sum(sizes.values())
    if total <= max_offsets:
        return dict(latest)
    # Step 1
    small = sorted(
        (key for key, size in sizes.items() if max_offsets * size < total),
        key=lambda key: (-sizes[key], key),
    )
    grant = {key: 1 if rank < max_offsets else 0 for rank, key in enumerate(small)}
    # Step 2
    others = {key: size for key, size in sizes.items() if key not in small}
    budget, others_total = max_offsets - sum(grant.values()), sum(others.values())
    shares = {key: divmod(budget * size, others_total) for key, size in others.items()}
    grant.update({key: whole for key, (whole, _) in shares.items()})
    leftover = budget - sum(whole for whole, _ in shares.values())
    for key in sorted(shares, key=lambda k: (-shares[k][1], k))[:leftover]:
        grant[key] += 1
    return {
        key: start.get(key, 0) + grant[key] if key in grant else end for key, end in latest.items()
    }


def pin_latest(
    start: Mapping[PartitionKey, int], latest: Mapping[PartitionKey, int]
) -> PartitionOffsets:
    """Batch 0's end when its start holds -1 ("latest", not pinned yet): the concrete latest
    offset for those partitions, the start for the others, so that nothing is admitted.

    Batch 0 then exists only to write the pinned start to Spark's offset log: its replay after
    a crash, and batch 1, start there, whatever "latest" is by then. A -1 partition missing
    from ``latest`` is gone (its deletion was confirmed); nothing was to be read from it. One
    whose latest is -1 too was left out of the last metadata answer without being confirmed
    deleted (held at its start): nothing is pinned then, ``start`` itself is returned, so that
    Spark runs no batch and asks again; dropped, it would later be read from its log start.
    """
    if any(offset == LATEST and latest.get(key) == LATEST for key, offset in start.items()):
        return dict(start)
    return {
        key: latest[key] if offset == LATEST else offset
        for key, offset in start.items()
        if offset != LATEST or key in latest
    }


def available_now_end(
    start: Mapping[PartitionKey, int],
    target: Mapping[PartitionKey, int],
    latest: Mapping[PartitionKey, int],
) -> PartitionOffsets:
    """The end of a ``Trigger.AvailableNow`` batch: ``target`` (the latest offsets when the
    run began), but never below ``start``, over the partitions of both.

    A record or partition that appeared between fixing the target and pinning the start would
    otherwise give an end below the start (a false data loss) or a partition reported gone.
    Only ``latest`` (now) tells a real loss: a partition absent from it is gone (confirmed
    deleted), and one whose latest offset is below the start went back; both keep that answer
    so that it is reported. A partition held at its start (left out of the last metadata
    answer, deletion not confirmed) has ``latest`` equal to its start: its end is the target,
    never below the start.
    """
    end: PartitionOffsets = {}
    for key in sorted(start.keys() | target.keys()):
        if key not in latest:
            continue
        first = start.get(key, 0)
        end[key] = latest[key] if latest[key] < first else max(first, target.get(key, 0))
    return end


class TriggerDelay:
    """``minOffsetsPerTrigger`` with ``maxTriggerDelay``: hold a batch back until enough
    offsets are available, or until the delay has passed since the last admitted batch.

    Like Spark's, the timer lives in the driver's memory: the first trigger after a (re)start
    is always admitted.
    """

    def __init__(self, min_offsets: int, max_delay_s: float, clock: Clock = time.monotonic):
        self.min_offsets = min_offsets
        self.max_delay_s = max_delay_s
        self._clock = clock
        self._last: float | None = None

    def admit(self, available: int) -> bool:
        now = self._clock()
        due = self._last is None or now - self._last >= self.max_delay_s
        if due or available >= self.min_offsets:
            self._last = now
            return True
        return False
