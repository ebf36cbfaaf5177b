"""Very large transaction timeout that can stall read_committed readers.

## What

`transaction.timeout.ms` is above `max_timeout_ms` (15 minutes by default).

## Why

A `read_committed` consumer never reads past the last stable offset (LSO): the first
offset of the oldest transaction still open on the partition. When a producer dies
mid-transaction and is not restarted with the same `transactional.id`, nothing aborts
that transaction until the coordinator's timeout fires.

## What breaks

**Stall.** Every downstream `read_committed` consumer of the output partitions stops
for up to `transaction.timeout.ms` (an hour with Flink's default), and consumer lag
alarms fire although the data is there.

## Fix

Use the smallest timeout EOS002 accepts (the commit window times the safety factor),
and make restarts fast instead of making the timeout long.

## Options

- `max_timeout_ms` (default `900000`): the largest timeout accepted without a warning.

## Needs

A producer config.

## Examples

PASS:

```properties
transaction.timeout.ms=900000
```

FAIL:

```properties
transaction.timeout.ms=3600000
```

## Source

- https://kafka.apache.org/documentation/#consumerconfigs_isolation.level
- https://cwiki.apache.org/confluence/display/KAFKA/KIP-98+-+Exactly+Once+Delivery+and+Transactional+Messaging
"""

from __future__ import annotations

from collections.abc import Iterator

from connectors.options import format_duration
from connectors.policy.context import LintContext
from connectors.policy.findings import Finding
from connectors.policy.rule import RuleMeta
from connectors.transaction_timeout import STALL_LIMIT_MS

RULE = RuleMeta(
    id="EOS003",
    name="transaction-timeout-stalls-readers",
    severity="warning",
    options={"max_timeout_ms": float(STALL_LIMIT_MS)},
)


def check(ctx: LintContext) -> Iterator[Finding]:
    if ctx.producer is None:
        return
    timeout = ctx.producer.get("transaction.timeout.ms")
    limit = int(RULE.option(ctx, "max_timeout_ms"))
    if timeout.ms() > limit:
        yield RULE.finding(
            f"{timeout.timed()} is above {format_duration(limit)}: if a producer dies"
            " mid-transaction, read_committed consumers of the output stop at the last stable"
            f" offset for up to {format_duration(timeout.ms())}",
            settings=(timeout,),
            fix=f"lower {timeout.key} to at most {limit}, just above what EOS002 requires",
        )
