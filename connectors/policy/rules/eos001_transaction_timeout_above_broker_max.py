"""Producer transaction timeout above the broker's transaction.max.timeout.ms.

## What

The producer's `transaction.timeout.ms` is larger than the broker's
`transaction.max.timeout.ms`.

## Why

The broker caps how long a transaction may stay open. Flink's `KafkaSink` sets a 1 h
transaction timeout by default while a broker on defaults allows 15 minutes, so configs
copied from Flink hit this limit first.

## What breaks

**Startup error.** `InitProducerId` is rejected with `INVALID_TRANSACTION_TIMEOUT`:
`init_transactions()` fails and the sink dies before writing anything.

## Fix

Lower `transaction.timeout.ms` to at most the broker maximum, or raise
`transaction.max.timeout.ms` on every broker (a rolling change) to at least the timeout.
Keep EOS002 in mind: the timeout must still cover trigger + batch + restart.

## Needs

A producer config and broker config. The CLI assumes a broker on Apache Kafka defaults
(`transaction.max.timeout.ms=900000`) when it gets no broker config and no
`--bootstrap-servers`; the sink's startup check skips this rule without broker config.

## Examples

PASS:

```properties
# producer
transaction.timeout.ms=900000
# broker (default)
transaction.max.timeout.ms=900000
```

FAIL:

```properties
# producer: Flink KafkaSink's default
transaction.timeout.ms=3600000
# broker (default)
transaction.max.timeout.ms=900000
```

## Source

- https://kafka.apache.org/documentation/#brokerconfigs_transaction.max.timeout.ms
- https://nightlies.apache.org/flink/flink-docs-stable/docs/connectors/datastream/kafka/#fault-tolerance
"""

from __future__ import annotations

from collections.abc import Iterator

from connectors.policy.context import LintContext
from connectors.policy.findings import Finding
from connectors.policy.rule import RuleMeta

RULE = RuleMeta(id="EOS001", name="transaction-timeout-above-broker-max", severity="error")


def check(ctx: LintContext) -> Iterator[Finding]:
    if ctx.producer is None or ctx.broker is None:
        return
    timeout = ctx.producer.get("transaction.timeout.ms")
    limit = ctx.broker.get("transaction.max.timeout.ms")
    if timeout.ms() > limit.ms():
        yield RULE.finding(
            f"{timeout.timed()} exceeds {limit.timed()}: the broker rejects InitProducerId with"
            " INVALID_TRANSACTION_TIMEOUT, so the sink fails at startup",
            settings=(timeout, limit),
            fix=f"set {timeout.key} to at most {limit.value}, or raise transaction.max.timeout.ms"
            f" to at least {timeout.value} on every broker",
        )
