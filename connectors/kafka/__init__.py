"""Kafka I/O, by role: ``source/`` (reading offset ranges) and ``sink/`` (the transactional
writer and committer), beside the code both use or the operator tools share:

- ``client_config``, ``client_pool``: client settings and the worker's pooled clients;
- ``key_policy``: which ``kafka.*`` keys each side refuses, forces, keeps or translates from
  the Java client's names (no client import); ``client_check``: librdkafka's own check of them;
- ``transactions``, ``txn_coordinators``, ``end_txn``: the transaction admin (kafka-python),
  which commits, aborts and describes transactions by id;
- ``cluster_facts``: broker and topic configs, for the sink's startup checks and the linter.
"""
