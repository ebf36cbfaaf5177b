"""Broker transactional.id.expiration.ms shorter than the max idle time or checkpoint age.

## What

The broker's `transactional.id.expiration.ms` is shorter than the longest time a
transactional id may go unused: the larger of the longest time the running pipeline
may commit no transaction (`--max-idle-time`: no input, no batch) and the longest time
it may be down and then resume from its checkpoint (`--max-checkpoint-age`).

## Why

The coordinator forgets a transactional id (and its producer id and epoch) once it has
seen no transaction from it for `transactional.id.expiration.ms`. Recovery commits the
transactions recorded in the checkpoint by resuming exactly that producer id and epoch.

## What breaks

**Silent loss** or a **startup error** on recovery: after a longer pause the producer id
is unknown (`InvalidPidMappingException`), so the pre-committed batch of the checkpoint
cannot be committed, while its source offsets already count as processed.

## Fix

Raise `transactional.id.expiration.ms` on every broker to at least the longer of the
max idle time and the max checkpoint age, or keep both shorter than the expiration (and
say so with `--max-idle-time` / `--max-checkpoint-age`).

## Needs

Broker config (the CLI assumes Apache Kafka's default of 7 days when none is given).
The max idle time comes from `--max-idle-time` and the max checkpoint age from
`--max-checkpoint-age` (or `timing` in the pipeline file), both 1 day by default.

## Examples

PASS (`--max-checkpoint-age 1d`, `--max-idle-time 3d`):

```properties
transactional.id.expiration.ms=604800000
```

FAIL (`--max-checkpoint-age 7d`, or `--max-idle-time 7d`):

```properties
transactional.id.expiration.ms=86400000
```

## Source

- https://kafka.apache.org/documentation/#brokerconfigs_transactional.id.expiration.ms
"""

from __future__ import annotations

from collections.abc import Iterator

from connectors.options import format_duration
from connectors.policy.context import LintContext
from connectors.policy.findings import Finding
from connectors.policy.rule import RuleMeta

RULE = RuleMeta(id="EOS009", name="transactional-id-expiration-too-short", severity="error")


def check(ctx: LintContext) -> Iterator[Finding]:
    if ctx.broker is None:
        return
    expiration = ctx.broker.get("transactional.id.expiration.ms")
    timing = ctx.timing
    pause = timing.max_pause_ms
    if expiration.ms() >= pause:
        return
    yield RULE.finding(
        f"{expiration.timed()} is shorter than the longest pause, max(max idle time"
        f" {format_duration(timing.max_idle_time_ms)}, max checkpoint age"
        f" {format_duration(timing.max_checkpoint_age_ms)}) = {format_duration(pause)}: after"
        " a longer pause the coordinator has forgotten the producer id, so recovery cannot"
        " commit the batch the checkpoint recorded",
        settings=(
            expiration,
            *ctx.timing_settings("max_idle_time_ms", "max_checkpoint_age_ms"),
        ),
        fix=f"raise transactional.id.expiration.ms to at least {pause} on every broker, or"
        " never let the pipeline idle or restore checkpoints older than"
        f" {format_duration(expiration.ms())}",
    )
