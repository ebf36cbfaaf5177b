"""The kafka-eos Spark source as the rules must see it: a pipeline file's ``source:`` section.

That section configures the project's own source (``connectors/kafka``), not a
free-standing consumer. Its effective configuration differs from librdkafka's defaults:

- it reads through librdkafka (confluent-kafka), whatever ``--client`` says;
- it only ever ``assign()``s partitions, even for ``subscribe``, so it has no group
  membership and ``max.poll.interval.ms`` never expels it;
- it forces ``FORCED`` and refuses a ``kafka.*`` option for those keys at startup.

Linting the section as a plain consumer would flag defaults it never runs with and
suggest fixes it rejects. Mirrors ``connectors/kafka/source/client.py`` (not imported:
it pulls in confluent-kafka); ``tests/lint/test_lint_kafka_eos_source.py`` keeps the two
in step.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from connectors.policy.client_keys import Client

if TYPE_CHECKING:  # context imports this module: no runtime import back
    from connectors.policy.context import LintContext
    from connectors.policy.findings import Finding
    from connectors.policy.rule import RuleMeta

NAME = "the kafka-eos source"
CLIENT: Client = "librdkafka"

# What ``source_client.consumer_config`` sets whatever the options say.
FORCED: Mapping[str, str] = {"enable.auto.commit": "false", "auto.offset.reset": "error"}

# ``kafka.*`` options the source refuses at startup (SourceOptionError): what to do instead.
REJECTED: Mapping[str, str] = {
    "enable.auto.commit": "offsets live in the checkpoint and the source never commits them"
    " itself; set kafka.group.id to have the driver commit completed batches for lag"
    " monitoring",
    "auto.offset.reset": "choose where the first run starts with the source option"
    " startingOffsets (earliest, latest or JSON); offsets that retention deleted fail the"
    " query while failOnDataLoss is true (its default)",
}


def refused_option_findings(
    rule: RuleMeta, ctx: LintContext, key: str, consequence: str = ""
) -> Iterator[Finding]:
    """``rule``'s finding for ``kafka.<key>`` in the source section, which the source
    refuses at startup; ``consequence`` says what its forced value guarantees."""
    rejected = ctx.rejected_source_option(key)
    if rejected is None:
        return
    yield rule.finding(
        f"{rejected}: {NAME} refuses this option and does not start"
        f" (it forces {key}={FORCED[key]}{consequence})",
        settings=(rejected,),
        fix=f"remove {rejected.key}: {REJECTED[key]}",
    )
