"""Missing transactional id, or one that is not stable across restarts.

## What

Neither the producer's `transactional.id` nor the sink's `transactionalIdPrefix` is set
(outside a pipeline file's `sink:` section: the kafka-eos sink derives a stable prefix from
its checkpoint location), or one of them looks generated per run: it contains a UUID, a
long random-looking hex string, an epoch timestamp or a date-time, or a placeholder such as
`${random.uuid}`, `{uuid}`, `{timestamp}` or `{hostname}`.

## Why

The transactional id is how Kafka recognises "the same producer" after a restart. On
`init_transactions()` the coordinator aborts (or completes) the previous incarnation's
open transaction and fences zombies that still hold it. A new id per run is a new
producer: nothing fences the old one, and recovery cannot find the transactions the
checkpoint recorded.

## What breaks

- missing: the producer is only idempotent; there is no two-phase commit at all
  (**duplicates** on every replayed batch);
- unstable: zombie tasks keep writing (**duplicates**), and transactions left open by
  the crashed run block `read_committed` readers until their timeout (**stall**).

## Fix

Derive the id from what is stable: pipeline name, output topic and partition or task
index, e.g. `transactionalIdPrefix=orders-enrich-v1`.

## Needs

A producer config or sink options.

## Examples

PASS:

```properties
transactional.id=orders-enrich-v1-0
```

FAIL:

```properties
transactional.id=orders-enrich-3f2b9c1e-8d4a-4c7e-9b1f-2a6d5e7c8f90
```

## Source

- https://kafka.apache.org/documentation/#producerconfigs_transactional.id
- https://cwiki.apache.org/confluence/display/KAFKA/KIP-98+-+Exactly+Once+Delivery+and+Transactional+Messaging
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from connectors.policy.context import LintContext, Setting
from connectors.policy.findings import Finding
from connectors.policy.rule import RuleMeta

RULE = RuleMeta(id="EOS008", name="transactional-id-unstable", severity="error")

_PREFIX_OPTION = "transactionalIdPrefix"
_UNSTABLE: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}", re.I),
        "contains a UUID",
    ),
    (
        re.compile(
            r"(?<![0-9a-f])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{16,}(?![0-9a-f])", re.I
        ),
        "contains random-looking hex",
    ),
    (re.compile(r"(?<!\d)1\d{9}(\d{3})?(?!\d)"), "contains an epoch timestamp"),
    (re.compile(r"20\d{2}-?[01]\d-?[0-3]\d[T_ -]?[0-2]\d:?[0-5]\d"), "contains a date-time"),
    (
        re.compile(r"[$%]?[{(][^})]*(uuid|rand|time|date|now|epoch|pid|host)[^})]*[})]", re.I),
        "contains a per-run placeholder",
    ),
)


def unstable_reason(value: str) -> str | None:
    """Why ``value`` will differ between runs, or ``None`` if it looks stable."""
    return next((reason for pattern, reason in _UNSTABLE if pattern.search(value)), None)


def check(ctx: LintContext) -> Iterator[Finding]:
    if ctx.producer is None and not ctx.input.sink_options:
        return
    ids = [setting for setting in (_transactional_id(ctx), _prefix(ctx)) if setting is not None]
    if not ids and not ctx.input.kafka_eos_sink:  # that sink derives a prefix if none is set
        yield RULE.finding(
            f"no transactional.id or {_PREFIX_OPTION}: the producer is only idempotent, so"
            " there is no two-phase commit and replayed batches are written twice",
            settings=(),
            keys=("transactional.id", _PREFIX_OPTION),
            fix=f"set the sink option {_PREFIX_OPTION} (or transactional.id) to a name that"
            " stays the same across restarts, e.g. <pipeline>-<version>",
        )
    for setting in ids:
        reason = unstable_reason(setting.value)
        if reason is not None:
            yield RULE.finding(
                f"{setting} {reason}: a restarted job gets a new id, so it cannot fence the"
                " previous run's zombies or finish its open transactions",
                settings=(setting,),
                fix=f"derive {setting.key} from stable names only (pipeline, topic, partition)",
            )


def _transactional_id(ctx: LintContext) -> Setting | None:
    return None if ctx.producer is None else ctx.producer.explicit("transactional.id")


def _prefix(ctx: LintContext) -> Setting | None:
    value = ctx.input.sink_option(_PREFIX_OPTION)
    return None if value is None else Setting("sink option", _PREFIX_OPTION, value)
