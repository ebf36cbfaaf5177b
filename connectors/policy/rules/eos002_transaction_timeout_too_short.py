"""Transaction timeout not comfortably above trigger interval + batch duration + restart time.

## What

`transaction.timeout.ms` is below `safety_factor` x (trigger interval + max batch
duration + max restart time).

## Why

A two-phase-commit sink keeps one transaction open from the moment it starts writing a
batch until the batch's checkpoint is committed; if the job crashes after the
pre-commit, the restarted job must commit that same transaction. The transaction
coordinator aborts any transaction older than `transaction.timeout.ms`, without asking.

## What breaks

**Loss, reported.** After a crash, a batch that was decided (its offsets are in the
checkpoint, its commit decision written) is aborted by the coordinator before the
restarted job commits it: the source will not re-read it, and the sink cannot commit
it, so its records never reach `read_committed` readers. The kafka-eos sink does not go
on past it: it stops on that batch with `KAFKA_EOS.SINK.TRANSACTION_LOST`, at every
restart, until `kafka-eos txn resolve` records the loss (docs/sink.md, "Runbook: a stuck
batch"); its input must then be re-processed outside the query. A transaction aborted
before its batch is decided fails the batch with `KAFKA_EOS.SINK.PRE_COMMIT_LOST` and
Spark replays it (**stall**), as slow batches are, short of a crash.

## Fix

Raise `transaction.timeout.ms` to at least the required value (and the broker's
`transaction.max.timeout.ms` with it, see EOS001), or make the window smaller: a shorter
trigger interval, smaller batches, faster restarts.

## Options

- `safety_factor` (default `2`): how many times the window the timeout must be.

## Needs

A producer config. Timing uses `--trigger-interval`, `--max-batch-duration` and
`--max-restart-time`, or their defaults (10s, 1m, 5m).

## Examples

PASS (window 10s + 1m + 5m = 6m10s, needs 12m20s):

```properties
transaction.timeout.ms=900000
```

FAIL (librdkafka's and Java's default of 1 minute):

```properties
transaction.timeout.ms=60000
```

## Source

- https://nightlies.apache.org/flink/flink-docs-stable/docs/connectors/datastream/kafka/#fault-tolerance
- https://kafka.apache.org/documentation/#producerconfigs_transaction.timeout.ms
"""

from __future__ import annotations

from collections.abc import Iterator

from connectors.options import format_duration
from connectors.policy.context import LintContext
from connectors.policy.findings import Finding
from connectors.policy.rule import RuleMeta
from connectors.transaction_timeout import SAFETY_FACTOR

RULE = RuleMeta(
    id="EOS002",
    name="transaction-timeout-too-short",
    severity="error",
    options={"safety_factor": SAFETY_FACTOR},
)


def check(ctx: LintContext) -> Iterator[Finding]:
    if ctx.producer is None:
        return
    timeout = ctx.producer.get("transaction.timeout.ms")
    factor = RULE.option(ctx, "safety_factor")
    timing = ctx.timing
    required = round(factor * timing.commit_window_ms)
    if timeout.ms() >= required:
        return
    fix = f"set {timeout.key} to at least {required}"
    if ctx.broker is not None and required > ctx.broker.get("transaction.max.timeout.ms").ms():
        fix += f" and raise the brokers' transaction.max.timeout.ms to at least {required}"
    yield RULE.finding(
        f"{timeout.timed()} is below {factor:g} x (trigger interval"
        f" {format_duration(timing.trigger_interval_ms)} + max batch duration"
        f" {format_duration(timing.max_batch_duration_ms)} + max restart time"
        f" {format_duration(timing.max_restart_time_ms)}) = {format_duration(required)}:"
        " after a crash the coordinator can abort a decided batch's transaction before the"
        " restarted job commits it; its records are then lost to read_committed readers, and"
        " the kafka-eos sink stops on that batch (KAFKA_EOS.SINK.TRANSACTION_LOST) until"
        " `kafka-eos txn resolve`",
        settings=(
            timeout,
            *ctx.timing_settings(
                "trigger_interval_ms", "max_batch_duration_ms", "max_restart_time_ms"
            ),
        ),
        fix=fix + ", or shorten the trigger interval, batches or restart time",
    )
