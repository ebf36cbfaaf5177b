"""Subscribing source consumer with max.poll.interval.ms below the batch duration.

## What

The source consumer joins a group (Spark `subscribe`/`subscribePattern`, or a
`group.id` without `assign`) and its `max.poll.interval.ms` is below the longest gap
between two polls: max(trigger interval, max batch duration).

The kafka-eos source (a pipeline file's `source:` section) never joins a group: it
assigns the partitions of a `subscribe` itself, so this rule does not apply to it.

## Why

A group member that does not poll for `max.poll.interval.ms` is considered dead: it
leaves the group and its partitions go to another member, while it is still processing
the batch it fetched.

## What breaks

**Stall** (or **duplicates** where offsets are committed to the group): the batch's
offset commit is rejected because the member was fenced, the batch is replayed, the next
one is just as long, and the job loops through rebalances.

## Fix

Set `max.poll.interval.ms` well above the longest batch (twice is a good start), or read
with `assign` instead of a group subscription.

## Needs

A source consumer config of a subscribing consumer (not the kafka-eos source). Timing
from `--trigger-interval` and `--max-batch-duration` (defaults 10s and 1m).

## Examples

PASS (`--max-batch-duration 5m`):

```properties
group.id=orders-enrich
max.poll.interval.ms=600000
```

FAIL (`--max-batch-duration 10m`, default interval of 5 minutes):

```properties
group.id=orders-enrich
```

## Source

- https://kafka.apache.org/documentation/#consumerconfigs_max.poll.interval.ms
- https://cwiki.apache.org/confluence/display/KAFKA/KIP-62%3A+Allow+consumer+to+send+heartbeats+from+a+background+thread
"""

from __future__ import annotations

from collections.abc import Iterator

from connectors.options import format_duration
from connectors.policy.context import LintContext
from connectors.policy.findings import Finding
from connectors.policy.rule import RuleMeta

RULE = RuleMeta(id="EOS016", name="max-poll-interval-below-batch", severity="error")


def check(ctx: LintContext) -> Iterator[Finding]:
    if ctx.source is None or not ctx.input.subscribes():
        return
    interval = ctx.source.get("max.poll.interval.ms")
    timing = ctx.timing
    gap = max(timing.trigger_interval_ms, timing.max_batch_duration_ms)
    if interval.ms() >= gap:
        return
    yield RULE.finding(
        f"{interval.timed()} is below the longest gap between polls, max(trigger interval,"
        f" max batch duration) = {format_duration(gap)}: the consumer is expelled from its"
        " group mid-batch and the batch is replayed, over and over",
        settings=(
            interval,
            *ctx.timing_settings("trigger_interval_ms", "max_batch_duration_ms"),
        ),
        fix=f"set max.poll.interval.ms to at least {2 * gap} (twice the longest batch), or"
        " read with assign instead of subscribe",
    )
