"""The transactional sink's Kafka side, one protocol role per module, as Flink's ``KafkaSink``:

- ``options``: the sink's options, parsed once; exactly-once's are a type of their own;
- ``startup``: the startup checks, and the transaction timeout the sink chooses;
- ``tasks``: what a task does from its first row to its barrier (the end of its input);
- ``exactly_once_writer``: produce in one transaction, then pre-commit at the barrier;
  ``writer``: the base writer, and the at-least-once and no-guarantee ones, which flush;
- ``committer``: the driver commits or aborts the committables on the completion notification;
  ``commit_path``: the committer under the 2PC, over the decisions at a checkpoint location;
- ``outcome``: where a refused commit stands; ``listing``: a prefix's open transactions;
- ``naming``: the transactional-id naming strategy; ``owners``: which query owns a prefix;
- ``records``: Arrow batches to Kafka records; ``lifetime``: transaction deadlines;
- ``errors``: the sink's errors, each with what to do.

Where a batch is decided and committed, top-down: ``connectors.spark.sink``
(``ExactlyOnceStreamWriter.commit``) translates Spark's call, ``commit_path`` builds the
committer, and ``checkpoint.two_phase_commit`` runs the steps in order.
"""
