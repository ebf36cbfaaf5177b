"""Deadline and bounded retries, on a manual clock: no test sleeps."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from checkpoint.deadline import Deadline, call_with_retries
from checkpoint.errors import DeadlineExceeded, ParticipantFenced
from checkpoint.testing import ManualClock


def test_remaining_counts_down_and_never_goes_negative(clock: ManualClock) -> None:
    deadline = Deadline(5.0, clock=clock)
    clock.advance(4.0)
    assert deadline.remaining() == 1.0 and not deadline.expired()
    assert deadline.bound(3.0) == 1.0
    clock.advance(2.0)
    assert deadline.remaining() == 0.0 and deadline.expired()
    with pytest.raises(DeadlineExceeded, match=r"flush did not finish within 5\.0 s"):
        deadline.check("flush")


def test_infinite_deadline_never_expires(clock: ManualClock) -> None:
    deadline = Deadline(math.inf, clock=clock)
    clock.advance(1e9)
    assert not deadline.expired() and deadline.bound(2.0) == 2.0


@pytest.mark.parametrize("timeout", [-1.0, math.nan])
def test_invalid_timeouts_are_rejected(timeout: float) -> None:
    with pytest.raises(ValueError, match="timeout must be >= 0"):
        Deadline(timeout)


class _Flaky:
    def __init__(self, clock: ManualClock, failures: list[BaseException]) -> None:
        self.clock, self.failures, self.calls = clock, failures, 0

    def __call__(self) -> str:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return "committed"


def _retry_timeouts(
    operation: _Flaky, timeout: float, sleep: Callable[[float], object] | None = None
) -> str:
    """``operation`` under :func:`call_with_retries`, which retries its TimeoutErrors until a
    ``timeout`` s deadline on its clock; a sleep advances the clock unless ``sleep`` is given."""
    return call_with_retries(
        operation,
        deadline=Deadline(timeout, clock=operation.clock),
        action="commit of sink-0-7",
        is_retriable=lambda e: isinstance(e, TimeoutError),
        sleep=sleep or operation.clock.advance,
    )


def test_retriable_errors_are_retried_with_backoff(clock: ManualClock) -> None:
    sleeps: list[float] = []
    operation = _Flaky(clock, [TimeoutError(), TimeoutError()])
    result = _retry_timeouts(operation, 10.0, sleep=lambda s: (sleeps.append(s), clock.advance(s)))
    assert (result, operation.calls, sleeps) == ("committed", 3, [0.1, 0.2])


def test_fatal_errors_are_not_retried(clock: ManualClock) -> None:
    operation = _Flaky(clock, [ParticipantFenced("newer epoch")])
    with pytest.raises(ParticipantFenced):
        _retry_timeouts(operation, 10.0)
    assert operation.calls == 1


def test_retries_stop_at_the_deadline_with_the_last_error_as_cause(clock: ManualClock) -> None:
    operation = _Flaky(clock, [TimeoutError("broker busy")] * 100)
    with pytest.raises(DeadlineExceeded, match="commit of sink-0-7 did not finish") as raised:
        _retry_timeouts(operation, 1.0)
    assert isinstance(raised.value.__cause__, TimeoutError)
    assert clock.now <= 1.0 + 1e-9
