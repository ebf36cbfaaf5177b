"""Linger too close to the delivery timeout.

## What

- librdkafka: `linger.ms` (`queue.buffering.max.ms`) is set and `message.timeout.ms`
  is not greater than it;
- Java: `delivery.timeout.ms` is set below `linger.ms + request.timeout.ms`.

## Why

A record first waits up to the linger time in the producer's queue, then needs one
request round trip; a delivery timeout shorter than that expires records that were
never given a chance. In transactional mode librdkafka's message timeout is the
transaction timeout, so a long linger also eats into the transaction.

## What breaks

**Startup error.** librdkafka refuses the config (`` `message.timeout.ms` must be greater
than `linger.ms` ``); Java's `KafkaProducer` throws `ConfigException` ("delivery.timeout.ms
should be equal to or larger than linger.ms + request.timeout.ms"). Java only checks an
explicitly set `delivery.timeout.ms`; unset, it is raised silently.

## Fix

Lower `linger.ms` (milliseconds are plenty for batching), or raise the delivery timeout
(within EOS004's limit).

## Needs

A producer config.

## Examples

PASS (Java):

```properties
linger.ms=5
request.timeout.ms=30000
delivery.timeout.ms=60000
```

FAIL (Java):

```properties
linger.ms=5
request.timeout.ms=30000
delivery.timeout.ms=20000
```

## Source

- https://github.com/confluentinc/librdkafka/blob/master/src/rdkafka_conf.c
  (`rd_kafka_topic_conf_finalize`)
- https://kafka.apache.org/documentation/#producerconfigs_delivery.timeout.ms
"""

from __future__ import annotations

from collections.abc import Iterator

from connectors.policy.context import ClientView, LintContext
from connectors.policy.findings import Finding
from connectors.policy.rule import RuleMeta

RULE = RuleMeta(id="EOS006", name="linger-vs-delivery-timeout", severity="error")


def check(ctx: LintContext) -> Iterator[Finding]:
    if ctx.producer is None:
        return
    if ctx.producer.client == "librdkafka":
        yield from _librdkafka(ctx.producer)
    else:
        yield from _java(ctx.producer)


def _librdkafka(producer: ClientView) -> Iterator[Finding]:
    linger = producer.explicit("linger.ms")
    timeout = producer.get("delivery.timeout.ms")
    if linger is None or timeout.ms() == 0 or timeout.number() > linger.number():
        return
    yield RULE.finding(
        f"{timeout} is not greater than {linger}: librdkafka refuses to create the producer"
        " (`message.timeout.ms` must be greater than `linger.ms`)",
        settings=(timeout, linger),
        fix=f"lower {linger.key} well below {timeout.value} (a few ms is enough for batching)",
    )


def _java(producer: ClientView) -> Iterator[Finding]:
    delivery = producer.explicit("delivery.timeout.ms")
    if delivery is None:
        return
    linger = producer.get("linger.ms")
    request = producer.get("request.timeout.ms")
    floor = linger.number() + request.number()
    if delivery.number() >= floor:
        return
    yield RULE.finding(
        f"{delivery} is below {linger} + {request} = {floor:g}: KafkaProducer throws"
        " ConfigException at startup",
        settings=(delivery, linger, request),
        fix=f"set {delivery.key} to at least {floor:g}, or lower {linger.key} or {request.key}",
    )
