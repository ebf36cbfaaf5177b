"""How long a pre-committed transaction must still live for the driver to commit it.

The broker aborts a transaction ``transaction.timeout.ms`` after it began, on its own clock,
whatever the driver decided. Once decided, such an abort loses the batch, so a transaction is
decided only while it has at least the **commit margin** left: the time the driver may need to
write its decision and end every transaction of the batch (``commitTimeoutMs``, the deadline
of its EndTxns, which covers a coordinator that moves after a broker crash). Tasks apply the
same margin, so a task fails while its batch can still be replayed, instead of handing the
driver a transaction it would refuse.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

LIBRDKAFKA_DEFAULT_TRANSACTION_TIMEOUT_MS = 60_000
DECISION_WRITE_ALLOWANCE_MS = 10_000
# How far the coordinator's clock (a transaction's start time) may be ahead of the clock that
# stamped the transaction's records (the executor's) before the transaction counts as begun
# after them: a later one.
CLOCK_SKEW_TOLERANCE_MS = 60_000


def transaction_timeout_ms(producer_config: Mapping[str, Any]) -> int:
    """The producer's ``transaction.timeout.ms`` (librdkafka's default when unset)."""
    raw = producer_config.get("transaction.timeout.ms", LIBRDKAFKA_DEFAULT_TRANSACTION_TIMEOUT_MS)
    return int(raw)


def commit_margin_ms(timeout_ms: int, commit_timeout_ms: int) -> int:
    """The commit deadline plus 10 s for the decision's write, but at most a quarter of the
    transaction's timeout: 70 s with the defaults and a timeout of minutes, and still a usable
    margin with the seconds-long timeouts of tests."""
    return min(commit_timeout_ms + DECISION_WRITE_ALLOWANCE_MS, timeout_ms // 4)


def remaining_ms(start_time_ms: int, timeout_ms: int, now_ms: int) -> int:
    """Time left before the broker may abort a transaction that began at ``start_time_ms``
    (the broker's clock, from DescribeTransactions; the driver's clock must be in step)."""
    return start_time_ms + timeout_ms - now_ms
