"""Operator tools behind the ``kafka-eos`` command, next to it: ``lingering`` (a query's open
transactions and what its decisions say of them), ``resolve`` (``txn resolve``), ``verify``
(counts of duplicates and losses) and ``drain`` (a read_committed read of a whole topic)."""
