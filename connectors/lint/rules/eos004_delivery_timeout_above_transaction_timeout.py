"""message.timeout.ms / delivery.timeout.ms above the transaction timeout.

## What

The producer's delivery timeout (`message.timeout.ms` in librdkafka, `delivery.timeout.ms`
in Java; librdkafka accepts both) is above `transaction.timeout.ms`, or is `0` (no limit).

## Why

A record may be retried until its delivery timeout. Once the coordinator has aborted the
transaction (its timeout fired), a record still being retried belongs to a dead
transaction.

## What breaks

- librdkafka: **startup error**, the producer is not created
  (`` `message.timeout.ms` must be set <= `transaction.timeout.ms` ``).
- Java: records outlive their transaction; the commit then fails with a fencing error
  and the batch is replayed (**stall** under broker slowness). Java's defaults trip this
  rule: `delivery.timeout.ms=120000` against `transaction.timeout.ms=60000`.

## Fix

librdkafka: leave `message.timeout.ms` unset; it then equals `transaction.timeout.ms`.
Java: set `delivery.timeout.ms` to at most `transaction.timeout.ms` (and at least
`linger.ms + request.timeout.ms`, see EOS006).

## Needs

A producer config.

## Examples

PASS (librdkafka):

```properties
transaction.timeout.ms=900000
# message.timeout.ms unset: librdkafka uses 900000
```

FAIL:

```properties
transaction.timeout.ms=60000
message.timeout.ms=300000
```

## Source

- https://github.com/confluentinc/librdkafka/blob/master/CONFIGURATION.md
  (`transaction.timeout.ms`, `message.timeout.ms`)
- https://kafka.apache.org/documentation/#producerconfigs_delivery.timeout.ms
"""

from __future__ import annotations

from collections.abc import Iterator

from connectors.lint.context import LintContext
from connectors.lint.findings import Finding
from connectors.lint.rule import RuleMeta

RULE = RuleMeta(id="EOS004", name="delivery-timeout-above-transaction-timeout", severity="error")

_CONSEQUENCE = {
    "librdkafka": "librdkafka refuses to create the producer"
    " (`message.timeout.ms` must be set <= `transaction.timeout.ms`)",
    "java": "a record can still be retried after the coordinator aborted its transaction, so"
    " the commit fails with a fencing error and the batch is replayed",
}


def check(ctx: LintContext) -> Iterator[Finding]:
    if ctx.producer is None:
        return
    delivery = ctx.producer.get("delivery.timeout.ms")
    timeout = ctx.producer.get("transaction.timeout.ms")
    unlimited = delivery.ms() == 0
    if not unlimited and delivery.ms() <= timeout.ms():
        return
    relation = "is 0 (no limit), longer than" if unlimited else "is above"
    yield RULE.finding(
        f"{delivery} {relation} {timeout}: {_CONSEQUENCE[ctx.producer.client]}",
        settings=(delivery, timeout),
        fix=f"set {delivery.key} to at most {timeout.value}"
        + (" or leave it unset" if ctx.producer.client == "librdkafka" else ""),
    )
