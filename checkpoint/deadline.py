"""Time bounds for blocking calls (flush, commit, abort, metadata), on a monotonic clock.

A deadline is fixed once and shared by every retry of one operation, so retries cannot stretch
the total wait past the budget (per-attempt timeouts would). The clock is injectable so tests
advance time instead of sleeping.

>>> from checkpoint.testing import ManualClock
>>> clock = ManualClock()
>>> deadline = Deadline(5.0, clock=clock)
>>> clock.advance(2.0)
>>> deadline.remaining()
3.0
>>> clock.advance(3.0)
>>> deadline.expired()
True
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TypeVar

from checkpoint.errors import DeadlineExceeded

Clock = Callable[[], float]
"""Seconds on a monotonic clock (``time.monotonic``); never wall-clock time, which can jump."""

T = TypeVar("T")


class Deadline:
    """The point in time by which an operation must finish. ``math.inf`` means unbounded."""

    __slots__ = ("_clock", "_expires_at", "timeout")

    def __init__(self, timeout: float, *, clock: Clock = time.monotonic) -> None:
        if math.isnan(timeout) or timeout < 0:
            raise ValueError(f"timeout must be >= 0 seconds (or math.inf), got {timeout!r}")
        self.timeout = timeout
        self._clock = clock
        self._expires_at = clock() + timeout

    def remaining(self) -> float:
        """Seconds left, never negative; pass it as the timeout of the next blocking call."""
        return max(0.0, self._expires_at - self._clock())

    def expired(self) -> bool:
        return self._clock() >= self._expires_at

    def check(self, action: str) -> None:
        """Raise :class:`DeadlineExceeded` naming ``action`` if no time is left."""
        if self.expired():
            raise DeadlineExceeded(f"{action} did not finish within {self.timeout} s")

    def bound(self, interval: float) -> float:
        """Clamp a sleep or poll interval so it never overshoots the deadline."""
        return min(interval, self.remaining())


def retry_pause(failures: int, *, backoff: float = 0.1, max_backoff: float = 2.0) -> float:
    """Seconds to wait after the ``failures``-th failure in a row: doubling, capped, so a
    broker that is coming back is not flooded and one that is back is found soon."""
    return min(max_backoff, backoff * 2 ** (failures - 1))


def call_with_retries(
    operation: Callable[[], T],
    *,
    deadline: Deadline,
    action: str,
    is_retriable: Callable[[BaseException], bool],
    backoff: float = 0.1,
    max_backoff: float = 2.0,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Run ``operation`` until it succeeds, fails with a non-retriable error, or time runs out.

    Errors fall in three kinds: retriable (``is_retriable`` says so: retried with exponential
    backoff), known-fatal and unknown (both re-raised at once, so a fenced producer stops
    immediately). On timeout :class:`DeadlineExceeded` carries the last retriable error as its
    cause.
    """
    attempt = 0
    while True:
        attempt += 1
        try:
            return operation()
        except Exception as exc:
            if not is_retriable(exc):
                raise
            pause = deadline.bound(retry_pause(attempt, backoff=backoff, max_backoff=max_backoff))
            if deadline.expired():
                raise DeadlineExceeded(
                    f"{action} did not finish within {deadline.timeout} s after {attempt} "
                    f"attempt(s); last error: {exc!r}. Raise the timeout or check the broker."
                ) from exc
            sleep(pause)
