"""Java-client key in a kafka-eos sink or source section.

## What

A `sink:` or `source:` section sets a `kafka.*` key of the Java client that librdkafka
lacks (`kafka.max.request.size`, `kafka.sasl.jaas.config`, `kafka.ssl.truststore.location`,
...). Both connectors read such keys through one table
(`connectors/kafka_keys.py`, listed in docs/options.md): a key with a librdkafka
equivalent is translated (a warning, saying what it becomes); one without is refused when
the query starts (an error, naming the key to use instead).

## Why

Spark's `kafka` format hands these keys to the Java client. kafka-eos hands `kafka.*` keys to
librdkafka, which has other names and other formats (PEM files, not Java keystores; no
JAAS; no Java partitioner classes).

## What breaks

A refused key: a **startup error**, the query does not start (`KAFKA_EOS.SINK.INVALID_OPTION` or
`KAFKA_EOS.SOURCE.INVALID_OPTION`). A translated key runs, under librdkafka's name and
sometimes another unit (`buffer.memory` bytes become `queue.buffering.max.kbytes` KiB).

## Fix

Write librdkafka's key, as the finding says; for a refused key, the key to use instead.

## Needs

A pipeline file's `sink:` or `source:` section.

## Examples

PASS:

```yaml
sink: {topic: out, kafka.message.max.bytes: 2097152}
```

FAIL (warning: translated to `message.max.bytes`):

```yaml
sink: {topic: out, kafka.max.request.size: 2097152}
```

FAIL (error: refused, use `kafka.ssl.ca.location` with a PEM file):

```yaml
source: {subscribe: orders, kafka.ssl.truststore.location: /etc/kafka/truststore.jks}
```

## Source

- https://github.com/confluentinc/librdkafka/blob/master/CONFIGURATION.md
- https://kafka.apache.org/documentation/#producerconfigs
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from connectors.kafka_keys import JAVA_KEYS, KeyRefused, java_translation
from connectors.policy.connector_models import SINK_NAME, SOURCE_NAME
from connectors.policy.context import ClientView, LintContext, Setting
from connectors.policy.findings import Finding
from connectors.policy.rule import RuleMeta
from connectors.redact import redact_value

RULE = RuleMeta(id="EOS018", name="java-client-key", severity="error")
_PREFIX = "kafka."


def check(ctx: LintContext) -> Iterator[Finding]:
    if ctx.input.kafka_eos_sink:
        yield from _section(ctx.input.sink_options, ctx.producer, "sink option", SINK_NAME)
    if ctx.input.kafka_eos_source:
        yield from _section(ctx.input.source_options, ctx.source, "source option", SOURCE_NAME)


def _section(
    options: Mapping[str, str], view: ClientView | None, where: str, name: str
) -> Iterator[Finding]:
    java = {
        key.lower()[len(_PREFIX) :]: value
        for key, value in options.items()
        if key.lower().startswith(_PREFIX) and key.lower()[len(_PREFIX) :] in JAVA_KEYS
    }
    config = {**(view.config if view is not None else {}), **java}
    for key, value in sorted(java.items()):
        # The message quotes the value: never a secret's (a JAAS entry holds a password).
        setting = Setting(where, f"{_PREFIX}{key}", redact_value(key, value))
        try:
            settings = java_translation(key, value, config)
        except KeyRefused as refused:
            yield RULE.finding(
                f"{setting}: a Java-client key that librdkafka lacks; {name} refuses it and "
                "does not start",
                settings=(setting,),
                fix=refused.fix.removeprefix("it is a Java-client key: "),
            )
            continue
        becomes = ", ".join(f"{k}={redact_value(k, v)}" for k, v in settings.items())
        yield RULE.finding(
            f"{setting}: a Java-client key; {name} runs it as librdkafka's "
            f"{becomes or 'defaults (it needs no such setting)'}",
            settings=(setting,),
            fix=(
                f"write {', '.join(_PREFIX + k for k in settings)} instead"
                if settings
                else f"remove {setting.key}"
            )
            + f": {JAVA_KEYS[key].how}",
            severity="warning",
        )
