"""Lag hidden behind a hanging transaction: a last stable offset pinned below the high watermark.

Under ``read_committed`` the driver plans to the LSO, and ``reportLatestOffset`` reports the
high watermark (PySpark 4.2 and later), so an open transaction that holds the LSO back shows in
Spark's progress as lag that does not fall; on PySpark 4.0 and 4.1 the progress shows no lag at
all. No transaction stays open longer than the broker's ``transaction.max.timeout.ms``
unless something is wrong (a coordinator that cannot abort it, a producer fenced halfway), so
an LSO that has not moved for longer than that, with offsets above it, is worth a warning.

:class:`PinnedLso` is the pure part: it is fed the LSO and the high watermark per partition and
says which partitions have just crossed the threshold, once per pinned LSO value.

>>> clock = iter([0.0, 5.0, 20.0]).__next__
>>> pinned = PinnedLso(lambda: 10.0, clock=clock, interval_s=0.0)
>>> pinned.observe({("t", 0): 7}, {("t", 0): 9})   # pinned since 0
[]
>>> pinned.observe({("t", 0): 7}, {("t", 0): 12})  # 5 s: not yet
[]
>>> [p.pinned_s for p in pinned.observe({("t", 0): 7}, {("t", 0): 15})]
[20.0]
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from connectors.kafka.source.offsets import PartitionKey, describe

# Kafka's default transaction.max.timeout.ms, used when the broker's value cannot be read.
DEFAULT_TRANSACTION_MAX_TIMEOUT_MS = 900_000
# The high watermark is asked at most this often: once per trigger, but not more.
CHECK_INTERVAL_S = 10.0


@dataclass(frozen=True)
class Pinned:
    """A partition whose LSO has stayed at ``lso`` for ``pinned_s`` seconds (at least) while
    the high watermark, ``high`` now, was above it."""

    key: PartitionKey
    lso: int
    high: int
    pinned_s: float


@dataclass
class _Since:
    lso: int
    since: float
    warned: bool = False


class PinnedLso:
    """Tracks, per partition, since when the LSO has stayed at one value below the high
    watermark; :meth:`observe` returns the partitions that have just stayed so for longer
    than the threshold, each once per pinned value. A partition whose LSO moves, or
    reaches the high watermark, starts over.

    ``threshold_s`` gives the threshold in seconds; it is called once, the first time a
    partition is seen pinned twice, so that the broker is asked for it only then."""

    def __init__(
        self,
        threshold_s: Callable[[], float],
        *,
        clock: Callable[[], float] = time.monotonic,
        interval_s: float | None = None,
    ) -> None:
        self._threshold_of = threshold_s
        self._threshold: float | None = None
        self._clock = clock
        self._interval_s = CHECK_INTERVAL_S if interval_s is None else interval_s
        self._last: float | None = None
        self._since: dict[PartitionKey, _Since] = {}

    @property
    def threshold_s(self) -> float:
        if self._threshold is None:
            self._threshold = self._threshold_of()
        return self._threshold

    def due(self) -> bool:
        """Whether to ask for the high watermarks now: at most once per ``interval_s``."""
        return self._last is None or self._clock() - self._last >= self._interval_s

    def observe(
        self, lso: Mapping[PartitionKey, int], high: Mapping[PartitionKey, int]
    ) -> list[Pinned]:
        now = self._clock()
        self._last = now
        crossed: list[Pinned] = []
        seen: dict[PartitionKey, _Since] = {}
        for key, stable in lso.items():
            top = high.get(key)
            if top is None or stable < 0 or top <= stable:
                continue  # caught up (or unknown): nothing pinned
            state = self._since.get(key)
            if state is None or state.lso != stable:
                state = _Since(stable, now)
            elif not state.warned and now - state.since > self.threshold_s:
                state.warned = True
                crossed.append(Pinned(key, stable, top, now - state.since))
            seen[key] = state
        self._since = seen
        return crossed


def pinned_warning(pinned: Pinned, threshold_ms: int, bootstrap_servers: str) -> str:
    """The log line for one pinned partition: what it means for this query, and the fix."""
    return (
        f"kafka-eos source: {describe(pinned.key)}: the last stable offset has stayed at "
        f"{pinned.lso} for at least {pinned.pinned_s:.0f} s while the high watermark is at "
        f"{pinned.high} ({pinned.high - pinned.lso} offsets above it), longer than the "
        f"broker's transaction.max.timeout.ms ({threshold_ms} ms). A transaction is open at "
        f"offset {pinned.lso} and read_committed readers (this query) cannot pass an open "
        "transaction: the query reads nothing of this partition beyond it, and its lag "
        "does not fall. Past that timeout the coordinators have aborted every "
        "transaction they track, so this one is most likely hanging: open on the partition "
        "and tracked by no coordinator (`kafka-eos txn list` cannot see it). Find and end it "
        f"with `kafka-eos txn find-hanging --bootstrap-servers {bootstrap_servers} --topic "
        f"{pinned.key[0]} --abort` (Kafka's own: `kafka-transactions.sh find-hanging` and "
        f"`kafka-transactions.sh abort --topic {pinned.key[0]} --partition {pinned.key[1]} "
        f"--start-offset {pinned.lso}`). A transaction a coordinator still tracks is listed by "
        f"`kafka-eos txn list --bootstrap-servers {bootstrap_servers}`"
    )
