"""Unbounded first batch: the source starts before latest without maxOffsetsPerTrigger.

## What

The kafka-eos source (a pipeline file's `source:` section) feeds an exactly-once sink
(`deliveryGuarantee` unset or `exactly_once`), starts anywhere but at the end of the
topics (`startingOffsets=earliest` or JSON offsets, `startingTimestamp`,
`startingOffsetsByTimestamp`), and sets no `maxOffsetsPerTrigger`. The source has no
byte limit per trigger, so nothing else bounds a batch.

`startingOffsets=latest` (the streaming default), or JSON offsets that are all `-1`,
does not fire: the first batch holds only what arrives after the start.

## Why

Without `maxOffsetsPerTrigger` a micro-batch reads everything from where the previous one
ended up to the end of the topics. The first one starts at `startingOffsets`, so it
covers everything the topics retain: days of data, in one batch. The sink keeps one
transaction per task open from the batch's first write to its commit, and the broker
aborts any transaction older than `transaction.timeout.ms`.

Spark logs a batch's offsets (`offsets/<N>` in the checkpoint) before running it and
replays exactly those offsets on every restart.

## What breaks

**Stall.** A first batch that takes longer than `transaction.timeout.ms` has its
transactions aborted by the broker; the sink fails it before deciding it
(`PreCommitLostError`), and every restart replays the same logged `offsets/0`, which
fails the same way. Setting `maxOffsetsPerTrigger` afterwards does not help: it bounds
batches Spark plans, not a batch it already logged. No data is lost or duplicated; the
query just never gets past that batch.

## Fix

Before the first run, set the source option `maxOffsetsPerTrigger` so that one batch
(at the job's throughput) fits well within `transaction.timeout.ms`. It also bounds the
catch-up batch after a long stop, which `startingOffsets=latest` does not.

A batch already logged that can never fit: stop the query; delete the uncommitted
`offsets/<N>` file of that batch, only when the sink holds no decision for N (no
`<checkpoint>/kafka-eos-sink/<N>.snapshot.json`); set `maxOffsetsPerTrigger`; restart.
See "A batch that can never fit in the transaction timeout" in `docs/sink.md`.

## Needs

A pipeline file's `source:` section (the kafka-eos source's options) and a producer
config or `sink:` section. The producer's `transaction.timeout.ms` (else its client
default) is named in the message.

## Examples

PASS:

```yaml
sink: {topic: orders-enriched, kafka.transaction.timeout.ms: 900000}
source: {subscribe: orders, startingOffsets: earliest, maxOffsetsPerTrigger: 500000}
```

PASS (the streaming default, `latest`):

```yaml
sink: {topic: orders-enriched, kafka.transaction.timeout.ms: 900000}
source: {subscribe: orders}
```

FAIL:

```yaml
sink: {topic: orders-enriched, kafka.transaction.timeout.ms: 900000}
source: {subscribe: orders, startingOffsets: earliest}
```

FAIL (a timestamp starts before latest too):

```yaml
sink: {topic: orders-enriched}
source: {subscribe: orders, startingTimestamp: 1700000000000}
```

## Source

- https://spark.apache.org/docs/latest/streaming/structured-streaming-kafka-integration.html
- https://kafka.apache.org/documentation/#producerconfigs_transaction.timeout.ms
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from connectors.policy.context import LintContext, Setting
from connectors.policy.findings import Finding
from connectors.policy.inputs import LintInput
from connectors.policy.rule import RuleMeta

RULE = RuleMeta(id="EOS017", name="unbounded-first-batch", severity="warning")

# Spark's precedence among the starting options, highest first (source_options._starting).
_STARTING = ("startingTimestamp", "startingOffsetsByTimestamp", "startingOffsets")
_LATEST = -1  # in JSON startingOffsets, as in Spark


def check(ctx: LintContext) -> Iterator[Finding]:
    if ctx.producer is None or not ctx.input.kafka_eos_source:
        return
    guarantee = ctx.input.sink_option("deliveryGuarantee")
    if guarantee is not None and guarantee.strip().lower() != "exactly_once":
        return
    if ctx.input.source_option("maxOffsetsPerTrigger") is not None:
        return
    start = _start_before_latest(ctx.input)
    if start is None:
        return
    timeout = ctx.producer.get("transaction.timeout.ms")
    yield RULE.finding(
        f"{start} and no maxOffsetsPerTrigger: the first micro-batch is unbounded (everything"
        f" from there to the end of the topics) and may outlive {timeout.timed()}; the broker"
        " then aborts its transactions, the batch fails, and every restart replays the same"
        " logged offsets/0 (setting maxOffsetsPerTrigger later cannot shrink a logged batch)",
        settings=(start, timeout),
        keys=("maxOffsetsPerTrigger",),
        fix="set the source option maxOffsetsPerTrigger so that one batch fits well within"
        f" {timeout.key}={timeout.value}. A batch already logged that can never fit: stop the"
        " query, delete its uncommitted offsets/<N> only when there is no"
        " <checkpoint>/kafka-eos-sink/<N>.snapshot.json (no decision for N), set"
        " maxOffsetsPerTrigger, restart",
    )


def _start_before_latest(lint_input: LintInput) -> Setting | None:
    """The starting option in force, unless the query starts at the end of the topics."""
    for name in _STARTING:
        value = lint_input.source_option(name)
        if value is not None:
            setting = Setting("source option", name, value)
            return None if name == "startingOffsets" and _is_latest(value) else setting
    return None  # a streaming query starts at latest by default


def _is_latest(value: str) -> bool:
    """``latest``, or JSON offsets that are all -1 (latest) for every partition."""
    if value.strip().lower() == "latest":
        return True
    try:
        topics = json.loads(value)
    except ValueError:
        return False  # not JSON: the source refuses it at startup
    if not isinstance(topics, dict) or not topics:
        return False
    partitions = list(topics.values())
    if not all(isinstance(offsets, dict) and offsets for offsets in partitions):
        return False
    return all(offset == _LATEST for offsets in partitions for offset in offsets.values())
