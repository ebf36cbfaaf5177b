"""The transactional sink's Kafka side, one protocol role per module, as Flink's ``KafkaSink``:

- ``options``: the sink's options, parsed once; exactly-once's are a type of their own;
- ``writer``: a task produces, then pre-commits at its barrier (the end of its input);
- ``committer``: the driver commits or aborts the committables on the completion notification;
- ``naming``: the transactional-id naming strategy; ``owners``: which query owns a prefix;
- ``records``: Arrow batches to Kafka records; ``lifetime``: transaction deadlines;
- ``errors``: the sink's errors, each with what to do.

Where a batch is decided and committed, top-down: ``connectors.spark.sink``
(``ExactlyOnceStreamWriter.commit``), which runs ``checkpoint.two_phase_commit``.
"""
