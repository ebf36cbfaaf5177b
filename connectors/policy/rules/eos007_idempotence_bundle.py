"""The idempotent-producer bundle: enable.idempotence, acks=all, retries >= 1, in-flight <= 5.

## What

Any of: `enable.idempotence` not `true`; `acks` (`request.required.acks`) not `all`/`-1`;
`retries` (`message.send.max.retries`) below 1;
`max.in.flight.requests.per.connection` (`max.in.flight`) above 5.

## Why

Transactions are built on the idempotent producer: the broker de-duplicates retried
batches by producer id and sequence number, which it can only do for up to 5 in-flight
batches per partition, with every batch acknowledged by all in-sync replicas and with
retries allowed.

## What breaks

**Startup error.** With a `transactional.id` both clients refuse the conflicting config:
librdkafka when creating the producer (`` `transactional.id` requires
`enable.idempotence=true` ``, `` `acks` must be set to `all` ... ``), Java with a
`ConfigException`. Without transactions the same config silently produces
**duplicates** on retry.

## Fix

Remove the conflicting keys: both clients pick the right values when the producer is
transactional (librdkafka) or by default (Java 3.0+).

## Needs

A producer config.

## Examples

PASS:

```properties
transactional.id=orders-eos-0
```

FAIL:

```properties
transactional.id=orders-eos-0
acks=1
max.in.flight=10
```

## Source

- https://kafka.apache.org/documentation/#producerconfigs_enable.idempotence
- https://github.com/confluentinc/librdkafka/blob/master/CONFIGURATION.md (`enable.idempotence`)
"""

from __future__ import annotations

from collections.abc import Iterator

from connectors.policy.context import LintContext
from connectors.policy.findings import Finding
from connectors.policy.rule import RuleMeta

RULE = RuleMeta(id="EOS007", name="idempotence-bundle", severity="error")

_MAX_IN_FLIGHT = 5
_CONSEQUENCE = (
    "transactional producers refuse this at startup; without transactions, retries duplicate"
    " records"
)


def check(ctx: LintContext) -> Iterator[Finding]:
    if ctx.producer is None:
        return
    idempotence = ctx.producer.get("enable.idempotence")
    if not idempotence.flag():
        yield RULE.finding(
            f"{idempotence}: transactions need the idempotent producer; {_CONSEQUENCE}",
            settings=(idempotence,),
            fix=f"set {idempotence.key}=true or remove it",
        )
    acks = ctx.producer.get("acks")
    if acks.value.strip().lower() not in ("all", "-1"):
        yield RULE.finding(
            f"{acks}: idempotence needs acks from all in-sync replicas; {_CONSEQUENCE}",
            settings=(acks,),
            fix=f"set {acks.key}=all or remove it",
        )
    retries = ctx.producer.get("retries")
    if retries.number() < 1:
        yield RULE.finding(
            f"{retries}: idempotence needs retries >= 1; {_CONSEQUENCE}",
            settings=(retries,),
            fix=f"remove {retries.key}; the default retries until the delivery timeout",
        )
    in_flight = ctx.producer.get("max.in.flight.requests.per.connection")
    if in_flight.number() > _MAX_IN_FLIGHT:
        yield RULE.finding(
            f"{in_flight}: the broker de-duplicates at most {_MAX_IN_FLIGHT} in-flight batches"
            f" per partition; {_CONSEQUENCE}",
            settings=(in_flight,),
            fix=f"set {in_flight.key} to at most {_MAX_IN_FLIGHT} or remove it",
        )
