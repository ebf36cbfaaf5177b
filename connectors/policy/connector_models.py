"""The kafka-eos connectors as the rules must see them: a pipeline file's ``source:`` and
``sink:`` sections configure the project's own source and sink, not a free-standing consumer
and producer, and they run with settings that differ from librdkafka's defaults. Linting them
as plain clients would flag defaults they never run with and suggest fixes they reject.

The source (:mod:`connectors.kafka.source`):

- reads through librdkafka (confluent-kafka), whatever ``--client`` says;
- only ever ``assign()``s partitions, even for ``subscribe``, so it has no group membership
  and ``max.poll.interval.ms`` never expels it;
- forces ``SOURCE.forced`` and refuses a ``kafka.*`` option for those keys at startup
  (:mod:`connectors.kafka_keys`, the table the source itself enforces).

The sink (:mod:`connectors.kafka.sink`), where its options are silent, so that a job written
for Spark's ``kafka`` sink runs unchanged:

- always has a transactional id: ``transactionalIdPrefix``, or a prefix derived from the
  checkpoint location (``connectors.kafka.sink.naming.derived_prefix``);
- without ``transaction.timeout.ms``, runs with the timeout it chooses from the brokers'
  maximum (:mod:`connectors.transaction_timeout`), which the rules see as chosen.
"""

from __future__ import annotations

from connectors.policy.client_keys import Client

SOURCE_NAME = "the kafka-eos source"
SOURCE_CLIENT: Client = "librdkafka"
SINK_NAME = "the kafka-eos sink"
