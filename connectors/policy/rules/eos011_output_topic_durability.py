"""Output topic that can lose committed records: RF < 3, min ISR < 2, or unclean election.

## What

An output topic has a replication factor below `min_replication_factor` (3), an
effective `min.insync.replicas` below `min_insync_replicas` (2), or
`unclean.leader.election.enable=true`. Topic-level values fall back to the broker's.

## Why

Exactly-once is only as good as the durability of what was committed. With `acks=all`
the leader waits only for the replicas currently in sync; with `min.insync.replicas=1`
that can be the leader alone. An unclean election makes an out-of-sync replica leader
and truncates the log to it.

## What breaks

**Silent loss** of committed records (or of transaction markers) when a broker dies:
the output becomes at-most-once while every metric says exactly-once.

## Fix

Create output topics with `replication.factor=3` and `min.insync.replicas=2`, and keep
`unclean.leader.election.enable=false` (the default) on the topic and the brokers.

## Options

- `min_replication_factor` (default `3`)
- `min_insync_replicas` (default `2`)

## Needs

Output topic names (the sink's `topic` option, `output_topics`, or `--output-topic`)
and facts about them: `--bootstrap-servers`, or `cluster.topics` in the pipeline file.
Topics nothing is known about are skipped, except a named topic the live cluster does
not have: that is reported as an **info** finding naming the topic, since its
durability could not be checked (exit code unchanged, even with `--strict`).

## Examples

PASS:

```yaml
cluster:
  topics:
    orders-enriched: {replication_factor: 3, config: {min.insync.replicas: "2"}}
```

FAIL:

```yaml
cluster:
  topics:
    orders-enriched: {replication_factor: 1}
```

## Source

- https://kafka.apache.org/documentation/#topicconfigs_min.insync.replicas
- https://kafka.apache.org/documentation/#topicconfigs_unclean.leader.election.enable
"""

from __future__ import annotations

from collections.abc import Iterator

from connectors.policy.context import LintContext, Setting
from connectors.policy.findings import Finding
from connectors.policy.rule import RuleMeta

RULE = RuleMeta(
    id="EOS011",
    name="output-topic-durability",
    severity="warning",
    options={"min_replication_factor": 3.0, "min_insync_replicas": 2.0},
)

_LOSS = "a broker failure can lose records that were already committed"
_UNCHECKED = (
    "its durability was not checked; if the broker auto-creates it, it gets the broker's"
    " default replication and min.insync.replicas"
)


def check(ctx: LintContext) -> Iterator[Finding]:
    min_rf = int(RULE.option(ctx, "min_replication_factor"))
    min_isr = int(RULE.option(ctx, "min_insync_replicas"))
    for name in ctx.input.output_topic_names():
        topic = ctx.topic(name)
        if topic is None:
            fix = (
                f"create {name} before the job runs, with replication factor {min_rf} and"
                f" min.insync.replicas={min_isr}, then lint again"
            )
            yield from RULE.missing_topic(ctx, "output", name, _UNCHECKED, fix)
            continue
        rf = topic.facts.replication_factor
        if rf is not None and rf < min_rf:
            setting = Setting(f"topic {name}", "replication.factor", str(rf))
            yield RULE.finding(
                f"{setting} is below {min_rf}: {_LOSS}",
                settings=(setting,),
                fix=f"recreate or reassign {name} with replication factor {min_rf}",
            )
        isr = topic.get("min.insync.replicas")
        if isr.number() < min_isr:
            yield RULE.finding(
                f"{isr} is below {min_isr}: acks=all can be satisfied by the leader alone,"
                f" so {_LOSS}",
                settings=(isr,),
                fix=f"set min.insync.replicas={min_isr} on topic {name}, with a replication"
                f" factor of at least {min_isr + 1}",
            )
        unclean = topic.get("unclean.leader.election.enable")
        if unclean.flag():
            yield RULE.finding(
                f"{unclean}: an out-of-sync replica can become leader and truncate committed"
                " transactional records",
                settings=(unclean,),
                fix=f"set unclean.leader.election.enable=false on topic {name} and the brokers",
            )
