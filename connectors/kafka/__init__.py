"""Kafka I/O, by role: ``source/`` (reading offset ranges) and ``sink/`` (the transactional
writer and committer), beside the code both use or the operator tools share:

- ``client_config``, ``client_pool``: client settings and the worker's pooled clients;
- ``client_check``: librdkafka's own check of the ``kafka.*`` keys that
  :mod:`connectors.kafka_keys` (the table of each side's keys) lets through;
- ``transactions``, ``txn_coordinators``, ``end_txn``: the transaction admin (kafka-python),
  which commits, aborts and describes transactions by id;
- ``cluster_facts``: broker and topic configs, for the sink's startup checks and the linter.
"""
