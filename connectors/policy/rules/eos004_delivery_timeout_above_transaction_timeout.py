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

The fix respects EOS006: the delivery timeout must also stay above `linger.ms`
(librdkafka) or at least `linger.ms + request.timeout.ms` (Java). When that floor is
not below `transaction.timeout.ms`, no delivery timeout satisfies both and the finding
says so: lower `linger.ms` (a few ms is enough for batching; Java: or
`request.timeout.ms`), or raise `transaction.timeout.ms` above the floor within the
broker's maximum (EOS001).

Java ignores librdkafka's spellings: under `--client java`, a `message.timeout.ms`
leaves `delivery.timeout.ms` at its default, and the message says so.

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

from connectors.policy.context import ClientView, LintContext, Setting
from connectors.policy.findings import Finding
from connectors.policy.rule import RuleMeta

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
        fix=_fix(ctx.producer, delivery, timeout),
    )


def _fix(producer: ClientView, delivery: Setting, timeout: Setting) -> str:
    """A delivery timeout that also meets EOS006's floor, or what to lower when none can."""
    linger = producer.get("linger.ms")
    if producer.client == "librdkafka":
        if linger.ms() < timeout.ms():
            return f"set {delivery.key} to at most {timeout.value} or leave it unset"
        return (
            f"no {delivery.key} satisfies both this rule and EOS006: librdkafka needs it above"
            f" {linger.key}={linger.value}, which is not below {timeout.key}={timeout.value};"
            f" lower {linger.key} well below {timeout.value} (a few ms is enough for batching)"
            f" and leave {delivery.key} unset, or raise {timeout.key} above {linger.value}"
            " within the brokers' transaction.max.timeout.ms (EOS001)"
        )
    request = producer.get("request.timeout.ms")
    floor = linger.ms() + request.ms()
    if floor <= timeout.ms():
        return (
            f"set {delivery.key} to at most {timeout.value} and at least {linger.key} +"
            f" {request.key} = {floor} (Java rejects less at startup, EOS006)"
        )
    return (
        f"no {delivery.key} satisfies both this rule and EOS006: Java needs at least"
        f" {linger.key} + {request.key} = {linger.value} + {request.value} = {floor}, above"
        f" {timeout.key}={timeout.value}; lower {linger.key} (a few ms is enough for batching)"
        f" or {request.key} until their sum is at most {timeout.value}, then set"
        f" {delivery.key} between that sum and {timeout.value}; or raise {timeout.key} to at"
        f" least {floor} within the brokers' transaction.max.timeout.ms (EOS001)"
    )
