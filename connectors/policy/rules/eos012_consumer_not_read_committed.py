"""Source or downstream consumer not on isolation.level=read_committed.

## What

The pipeline's source consumer, or a consumer of its output, has an effective
`isolation.level` other than `read_committed`. The defaults differ: the Java client
reads `read_uncommitted`, librdkafka `read_committed`.

## Why

Aborted transactions leave their records in the log; only transaction markers tell
readers to skip them. A `read_uncommitted` reader returns every record, aborted or
still open.

## What breaks

**Duplicates.** Every batch the sink aborted and retried shows up twice downstream, and
records of open transactions show up before they commit (or although they never will).
On the source side, the pipeline processes what its upstream producer rolled back.

## Fix

Set `isolation.level=read_committed` explicitly on every consumer, whatever the client.
A downstream consumer on the Java client needs it although librdkafka would not: lint
it with `--client java`, or give it `client: java` in the pipeline file.

## Needs

A consumer config (`--consumer-config`, the Spark source's `kafka.*` options) and/or
downstream consumer configs.

## Examples

PASS:

```properties
isolation.level=read_committed
```

FAIL (Java client, key unset):

```properties
group.id=billing
```

## Source

- https://kafka.apache.org/documentation/#consumerconfigs_isolation.level
- https://github.com/confluentinc/librdkafka/blob/master/CONFIGURATION.md (`isolation.level`)
"""

from __future__ import annotations

from collections.abc import Iterator

from connectors.policy.context import LintContext
from connectors.policy.findings import Finding
from connectors.policy.rule import RuleMeta

RULE = RuleMeta(id="EOS012", name="consumer-not-read-committed", severity="error")

_SOURCE = "the pipeline processes records its upstream producer aborted"
_DOWNSTREAM = (
    "it reads records of aborted and still-open transactions, so retried batches show up twice"
)


def check(ctx: LintContext) -> Iterator[Finding]:
    consumers = [(view, _DOWNSTREAM) for view in ctx.downstream]
    if ctx.source is not None:
        consumers.insert(0, (ctx.source, _SOURCE))
    for view, consequence in consumers:
        level = view.get("isolation.level")
        if level.value.strip().lower() != "read_committed":
            yield RULE.finding(
                f"{level}: {consequence}",
                settings=(level,),
                fix=f"set isolation.level=read_committed on the {view.label}",
            )
