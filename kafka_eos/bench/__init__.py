"""The measurements behind ``kafka-eos bench``, one module per suite: ``pipeline`` (the demo's
job under each delivery guarantee; the helpers the other suites share), ``source`` (a source
task and a trigger), ``avro`` (the codec beside Confluent's serdes) and ``contenders`` (ours
beside Spark's built-in pipeline and others, with ``job``, ``latency``, ``recovery``,
``discard``, ``contenders_report``, and the processors that are not Spark: ``flink``, ``quix``,
``peer_venv``, and their jobs in ``peers/``)."""
