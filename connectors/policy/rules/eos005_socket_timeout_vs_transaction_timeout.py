"""librdkafka socket.timeout.ms not below the transaction timeout.

## What

librdkafka's `socket.timeout.ms` is set and is not at least 100 ms below
`transaction.timeout.ms`.

## Why

`socket.timeout.ms` bounds every request, including the transactional ones
(`AddPartitionsToTxn`, `EndTxn`). librdkafka's documentation requires it to be at least
100 ms lower than the transaction timeout so that one request can complete before the
transaction times out; left unset, librdkafka sets it to `transaction.timeout.ms - 100`.

## What breaks

- above `transaction.timeout.ms + 100`: **startup error**, the producer is not created
  (`` `socket.timeout.ms` must be set <= `transaction.timeout.ms` + 100 ``);
- otherwise: a hung request outlives the transaction, which is aborted under it
  (**stall**, the batch is replayed).

## Fix

Leave `socket.timeout.ms` unset, or set it at least 100 ms below `transaction.timeout.ms`.

## Needs

A producer config linted with `--client librdkafka` (the default). The Java client has no
`socket.timeout.ms`, so the rule does not fire for it.

## Examples

PASS:

```properties
transaction.timeout.ms=900000
socket.timeout.ms=60000
```

FAIL:

```properties
transaction.timeout.ms=30000
socket.timeout.ms=60000
```

## Source

- https://github.com/confluentinc/librdkafka/blob/master/CONFIGURATION.md (`transaction.timeout.ms`)
- https://github.com/confluentinc/librdkafka/blob/master/src/rdkafka_conf.c
  (`rd_kafka_conf_finalize`)
"""

from __future__ import annotations

from collections.abc import Iterator

from connectors.policy.context import LintContext
from connectors.policy.findings import Finding
from connectors.policy.rule import RuleMeta

RULE = RuleMeta(id="EOS005", name="socket-timeout-vs-transaction-timeout", severity="error")

# librdkafka: "socket.timeout.ms must be at least 100ms lower than transaction.timeout.ms".
_MARGIN_MS = 100


def check(ctx: LintContext) -> Iterator[Finding]:
    if ctx.producer is None or ctx.producer.client != "librdkafka":
        return
    socket = ctx.producer.explicit("socket.timeout.ms")
    if socket is None:
        return
    timeout = ctx.producer.get("transaction.timeout.ms")
    limit = timeout.ms() - _MARGIN_MS
    if socket.ms() <= limit:
        return
    if socket.ms() > timeout.ms() + _MARGIN_MS:
        consequence = (
            "librdkafka refuses to create the producer"
            " (`socket.timeout.ms` must be set <= `transaction.timeout.ms` + 100)"
        )
    else:
        consequence = "a hung request can outlive the transaction, which is aborted under it"
    yield RULE.finding(
        f"{socket} is not at least {_MARGIN_MS} ms below {timeout}: {consequence}",
        settings=(socket, timeout),
        fix=f"set socket.timeout.ms to at most {limit}, or leave it unset",
    )
