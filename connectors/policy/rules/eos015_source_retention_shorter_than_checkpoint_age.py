"""Source topic retention shorter than the max checkpoint age.

## What

A source topic's effective `retention.ms` (the topic's own, else the broker's
`log.retention.ms`/`.minutes`/`.hours`) is shorter than `--max-checkpoint-age`.
`retention.ms=-1` (keep forever) never fires.

## Why

Restoring a checkpoint resumes from the offsets it recorded. Retention deletes old
segments on its own schedule, whether or not anybody has read them.

## What breaks

**Silent loss.** After a pause longer than the retention, the recorded offsets are gone;
the consumer resets (see EOS014) and the records in between are never processed.

## Fix

Raise `retention.ms` on the source topics to at least the max checkpoint age (with
margin), or restore only younger checkpoints and say so with `--max-checkpoint-age`.
Size-based retention (`retention.bytes`) can delete even sooner and is not checked.

## Needs

Source topic names (Spark `subscribe`/`assign`, `source_topics`, `--source-topic`) and
their config: `--bootstrap-servers`, or `cluster.topics` in the pipeline file. A named
topic the live cluster does not have is reported as an **info** finding naming the
topic, since its retention could not be checked (exit code unchanged, even with
`--strict`).

## Examples

PASS (`--max-checkpoint-age 1d`):

```yaml
cluster:
  topics:
    orders: {config: {retention.ms: "604800000"}}
```

FAIL (`--max-checkpoint-age 7d`):

```yaml
cluster:
  topics:
    orders: {config: {retention.ms: "86400000"}}
```

## Source

- https://kafka.apache.org/documentation/#topicconfigs_retention.ms
"""

from __future__ import annotations

from collections.abc import Iterator

from connectors.options import format_duration
from connectors.policy.context import LintContext
from connectors.policy.findings import Finding
from connectors.policy.rule import RuleMeta

RULE = RuleMeta(id="EOS015", name="source-retention-shorter-than-checkpoint-age", severity="error")


def check(ctx: LintContext) -> Iterator[Finding]:
    age = ctx.timing.max_checkpoint_age_ms
    for name in ctx.input.source_topic_names():
        topic = ctx.topic(name)
        if topic is None:
            fix = f"check the topic name, or create {name} before the job runs and lint again"
            yield from RULE.missing_topic(ctx, "source", name, "its retention was not checked", fix)
            continue
        retention = topic.get("retention.ms")
        if retention.ms() < 0 or retention.ms() >= age:
            continue
        yield RULE.finding(
            f"{retention.timed()} is shorter than the max checkpoint age {format_duration(age)}:"
            " restoring an older checkpoint resumes from offsets retention already deleted",
            settings=(retention, *ctx.timing_settings("max_checkpoint_age_ms")),
            fix=f"set retention.ms on topic {name} to at least {age} (or -1), or never restore"
            f" checkpoints older than {format_duration(retention.ms())}",
        )
