"""The kafka-eos Spark source as the rules must see it: a pipeline file's ``source:`` section.

That section configures the project's own source (``connectors/kafka``), not a
free-standing consumer. Its effective configuration differs from librdkafka's defaults:

- it reads through librdkafka (confluent-kafka), whatever ``--client`` says;
- it only ever ``assign()``s partitions, even for ``subscribe``, so it has no group
  membership and ``max.poll.interval.ms`` never expels it;
- it forces ``FORCED`` and refuses a ``kafka.*`` option for those keys at startup.

Linting the section as a plain consumer would flag defaults it never runs with and
suggest fixes it rejects. Mirrors ``connectors/kafka/source_client.py`` (not imported:
it pulls in confluent-kafka); ``tests/lint/test_lint_kafka_eos_source.py`` keeps the two
in step.
"""

from __future__ import annotations

from collections.abc import Mapping

from connectors.lint.client_keys import Client

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
