"""Transaction log replication the cluster cannot satisfy.

## What

Either `transaction.state.log.replication.factor` is larger than the number of brokers
(while `__transaction_state` does not exist yet), or `transaction.state.log.min.isr` is
larger than the replication factor of `__transaction_state` (its actual one when the
topic exists, the configured one otherwise).

## Why

The coordinator keeps every transaction's state in the internal topic
`__transaction_state`, created on first use with the configured replication factor, and
writes to it with `acks=all` against `transaction.state.log.min.isr`.

## What breaks

**Stall** at startup: the topic cannot be created, or every write to it fails with
`NOT_ENOUGH_REPLICAS`; `init_transactions()` times out with no useful error. Typical
on single-broker dev and CI clusters left on the default replication factor of 3.

## Fix

On small clusters set `transaction.state.log.replication.factor` and
`transaction.state.log.min.isr` to what they can hold (both `1` on a single broker);
in production keep 3 and 2 on at least 3 brokers.

## Needs

Broker config, plus the broker count (`--bootstrap-servers` or `cluster.broker_count`
in the pipeline file) for the first check.

## Examples

PASS (3 brokers):

```properties
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
```

FAIL (1 broker, defaults):

```properties
transaction.state.log.replication.factor=3
```

## Source

- https://kafka.apache.org/documentation/#brokerconfigs_transaction.state.log.replication.factor
- https://kafka.apache.org/documentation/#brokerconfigs_transaction.state.log.min.isr
"""

from __future__ import annotations

from collections.abc import Iterator

from connectors.policy.context import LintContext, Setting
from connectors.policy.findings import Finding
from connectors.policy.inputs import TRANSACTION_STATE_TOPIC
from connectors.policy.rule import RuleMeta

RULE = RuleMeta(id="EOS010", name="transaction-state-log-replication", severity="error")


def check(ctx: LintContext) -> Iterator[Finding]:
    if ctx.broker is None:
        return
    configured = ctx.broker.get("transaction.state.log.replication.factor")
    min_isr = ctx.broker.get("transaction.state.log.min.isr")
    facts = ctx.input.cluster.topics.get(TRANSACTION_STATE_TOPIC)
    brokers = ctx.input.cluster.broker_count
    actual = None if facts is None else facts.replication_factor
    if actual is None and brokers is not None and configured.number() > brokers:
        count = Setting("cluster", "broker_count", str(brokers))
        yield RULE.finding(
            f"{configured} is above the {brokers} broker(s) of the cluster: the coordinator"
            f" cannot create {TRANSACTION_STATE_TOPIC}, so init_transactions() times out",
            settings=(configured, count),
            fix=f"set transaction.state.log.replication.factor to at most {brokers} (and"
            f" transaction.state.log.min.isr to at most that), or add brokers",
        )
    replication = (
        configured
        if actual is None
        else Setting(f"topic {TRANSACTION_STATE_TOPIC}", "replication.factor", str(actual))
    )
    if min_isr.number() > replication.number():
        yield RULE.finding(
            f"{min_isr} is above {replication}: every write to {TRANSACTION_STATE_TOPIC} fails"
            " with NOT_ENOUGH_REPLICAS, so no transaction can begin or commit",
            settings=(min_isr, replication),
            fix=f"set transaction.state.log.min.isr to at most {replication.value}",
        )
