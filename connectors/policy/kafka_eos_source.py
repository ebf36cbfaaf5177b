"""The kafka-eos Spark source as the rules must see it: a pipeline file's ``source:`` section.

That section configures the project's own source (``connectors/kafka``), not a
free-standing consumer. Its effective configuration differs from librdkafka's defaults:

- it reads through librdkafka (confluent-kafka), whatever ``--client`` says;
- it only ever ``assign()``s partitions, even for ``subscribe``, so it has no group
  membership and ``max.poll.interval.ms`` never expels it;
- it forces ``SOURCE.forced`` and refuses a ``kafka.*`` option for those keys at startup
  (:mod:`connectors.kafka.key_policy`, the table the source itself enforces).

Linting the section as a plain consumer would flag defaults it never runs with and
suggest fixes it rejects.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from connectors.kafka.key_policy import SOURCE
from connectors.policy.client_keys import Client

if TYPE_CHECKING:  # context imports this module: no runtime import back
    from connectors.policy.context import LintContext
    from connectors.policy.findings import Finding
    from connectors.policy.rule import RuleMeta

NAME = "the kafka-eos source"
CLIENT: Client = "librdkafka"


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
        f" (it forces {key}={SOURCE.forced[key]}{consequence})",
        settings=(rejected,),
        fix=f"remove {rejected.key}: {SOURCE.refused[key]}",
    )
