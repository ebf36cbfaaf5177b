"""Admission control: how far one micro-batch may read (``maxOffsetsPerTrigger``) and whether
it should wait for more data (``minOffsetsPerTrigger`` with ``maxTriggerDelay``).

Pure logic on offset snapshots, run on the driver in ``latestOffset``. Budgets count offsets,
not rows, as in Spark: under ``read_committed`` aborted records and transaction markers use
offsets but yield no rows, so a batch never has more rows than its budget.

>>> rate_limit({("t", 0): 0, ("t", 1): 0}, {("t", 0): 900, ("t", 1): 100}, 10)
{('t', 0): 9, ('t', 1): 1}
>>> rate_limit({("t", 0): 0, ("t", 1): 0}, {("t", 0): 10**6, ("t", 1): 10}, 100)
{('t', 0): 99, ('t', 1): 1}
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from checkpoint.deadline import Clock
from connectors.kafka.offsets import PartitionKey, PartitionOffsets


def backlog(
    start: Mapping[PartitionKey, int], latest: Mapping[PartitionKey, int]
) -> dict[PartitionKey, int]:
    """Offsets available per partition; a partition new since ``start`` counts from 0."""
    sizes = {key: end - start.get(key, 0) for key, end in latest.items()}
    return {key: size for key, size in sizes.items() if size > 0}


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
