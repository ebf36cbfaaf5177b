"""Source offset reset that silently skips: auto.offset.reset=latest, or failOnDataLoss=false.

## What

The source consumer's effective `auto.offset.reset` is `latest` (librdkafka: `largest`,
`end`; the default of both clients), or the Spark source option `failOnDataLoss` is
`false`.

The kafka-eos source (a pipeline file's `source:` section) forces
`auto.offset.reset=error` and refuses a `kafka.auto.offset.reset` option at startup;
for it the rule reports that option instead, and never suggests setting it.

## Why

The reset policy applies whenever the offset to resume from is missing or no longer
exists, typically because retention deleted it while the job was down (see EOS015).

## What breaks

**Silent loss.** The consumer jumps to the end of the partition and everything in
between is never processed; nothing fails. `earliest` re-reads what is left (the gap
is only what retention deleted), `none` (Java) / `error` (librdkafka) stops with an
error a human must look at.

## Fix

Set `auto.offset.reset=earliest`, or `none`/`error` to fail loudly; keep Spark's
`failOnDataLoss=true` (its default). For the kafka-eos source, remove
`kafka.auto.offset.reset` and choose the first run's start with `startingOffsets`.

## Needs

A source consumer config, or the kafka-eos source's options.

## Examples

PASS:

```properties
auto.offset.reset=earliest
```

FAIL:

```properties
auto.offset.reset=latest
```

FAIL (pipeline file: the kafka-eos source refuses the option):

```yaml
source: {subscribe: orders, kafka.auto.offset.reset: earliest}
```

## Source

- https://kafka.apache.org/documentation/#consumerconfigs_auto.offset.reset
- https://spark.apache.org/docs/latest/streaming/structured-streaming-kafka-integration.html
"""

from __future__ import annotations

from collections.abc import Iterator

from connectors.policy.context import LintContext, Setting
from connectors.policy.findings import Finding
from connectors.policy.rule import RuleMeta

RULE = RuleMeta(id="EOS014", name="source-offset-reset-skips", severity="warning")

_SKIPPING = ("latest", "largest", "end")
_LOUD = {"java": "none", "librdkafka": "error"}


def check(ctx: LintContext) -> Iterator[Finding]:
    yield from RULE.refused_source_option(
        ctx, "auto.offset.reset", ", so a missing offset never silently skips"
    )
    if ctx.source is not None:
        reset = ctx.source.get("auto.offset.reset")
        if reset.value.strip().lower() in _SKIPPING:
            yield RULE.finding(
                f"{reset}: when the offset to resume from is missing or deleted, the consumer"
                " jumps to the end of the partition and silently skips the records in between",
                settings=(reset,),
                fix=f"set auto.offset.reset=earliest (re-read what is left) or"
                f" {_LOUD[ctx.source.client]} (fail loudly)",
            )
    fail_on_loss = ctx.input.source_option("failOnDataLoss")
    if fail_on_loss is not None and fail_on_loss.strip().lower() == "false":
        setting = Setting("source option", "failOnDataLoss", fail_on_loss)
        yield RULE.finding(
            f"{setting}: Spark skips offsets that retention deleted instead of failing",
            settings=(setting,),
            fix="remove failOnDataLoss (it defaults to true)",
        )
