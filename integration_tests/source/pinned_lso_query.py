"""A streaming query in a process of its own, for ``test_source_pinned_lso.py``: its stderr
carries what the stream reader logs in Spark's driver-side Python worker.

``python -m integration_tests.source.pinned_lso_query BOOTSTRAP TOPIC CHECKPOINT STOP_FILE``
reads TOPIC (read_committed, a trigger every second, a noop sink) until STOP_FILE exists or
180 s have passed, then stops the query and Spark.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from connectors.spark import register
from kafka_eos.spark_session import new_spark_session

LIMIT_S = 180


def main(bootstrap: str, topic: str, checkpoint: str, stop_file: str) -> None:
    spark = new_spark_session()
    register(spark)
    query = (
        spark.readStream.format("kafka-eos")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
        .writeStream.format("noop")
        .trigger(processingTime="1 second")
        .option("checkpointLocation", checkpoint)
        .start()
    )
    print("query started", file=sys.stderr, flush=True)
    began = time.monotonic()
    while not Path(stop_file).exists() and time.monotonic() - began < LIMIT_S:
        time.sleep(0.5)
    query.stop()
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:5])
