"""Source consumer with enable.auto.commit=true.

## What

The pipeline's source consumer has an effective `enable.auto.commit` of `true` (the
default of both clients).

The kafka-eos source (a pipeline file's `source:` section) forces
`enable.auto.commit=false` and refuses a `kafka.enable.auto.commit` option at startup;
for it the rule reports that option instead, and never suggests setting it.

## Why

In an exactly-once pipeline the source offsets belong to the checkpoint (or to the
transaction, via `send_offsets_to_transaction`). Auto-commit moves the consumer group's
offsets on a timer, ahead of anything the sink committed.

## What breaks

**Silent loss** whenever a run starts from the group offsets instead of the checkpoint
(a new checkpoint location, a lost checkpoint, a tool that resets the job): it skips
everything that was fetched but never committed downstream. Lag dashboards built on
group offsets also report progress that did not happen.

## Fix

Set `enable.auto.commit=false`. For the kafka-eos source, remove
`kafka.enable.auto.commit`: the source never auto-commits.

## Needs

A source consumer config, or the kafka-eos source's options.

## Examples

PASS:

```properties
enable.auto.commit=false
```

FAIL (key unset: both clients default to true):

```properties
group.id=orders-enrich
```

FAIL (pipeline file: the kafka-eos source refuses the option):

```yaml
source: {subscribe: orders, kafka.enable.auto.commit: false}
```

## Source

- https://kafka.apache.org/documentation/#consumerconfigs_enable.auto.commit
- https://github.com/confluentinc/librdkafka/blob/master/CONFIGURATION.md (`enable.auto.commit`)
"""

from __future__ import annotations

from collections.abc import Iterator

from connectors.policy.context import LintContext
from connectors.policy.findings import Finding
from connectors.policy.rule import RuleMeta

RULE = RuleMeta(id="EOS013", name="source-auto-commit", severity="warning")


def check(ctx: LintContext) -> Iterator[Finding]:
    yield from RULE.refused_source_option(ctx, "enable.auto.commit")
    if ctx.source is None:
        return
    auto_commit = ctx.source.get("enable.auto.commit")
    if auto_commit.flag():
        yield RULE.finding(
            f"{auto_commit}: group offsets advance on a timer, ahead of the checkpoint; a run"
            " that starts from them skips records the sink never committed",
            settings=(auto_commit,),
            fix="set enable.auto.commit=false; keep source offsets in the checkpoint",
        )
