"""The chaos harness's query, run as a process of its own so that the harness can kill -9 it.

Input records (key ``k<i>``, value the record's sequence number ``n`` as text, event time the
record's timestamp) -> the kafka-eos source -> two stages in one query -> the kafka-eos sink
(exactly-once) -> one output topic:

- stateless: one result per input record, key unchanged, value ``r:<n>``;
- stateful: a per-key count and sum over event-time windows of ``WINDOW_MS``, kept in Spark's
  state store and emitted once, when the watermark closes the window: value
  ``a:<window start ms>:<count>:<sum>``.

The aggregate runs in append mode: PySpark refuses update mode for every Python data source's
sink (docs/sink.md, "Output modes"). Append mode also makes each (key, window) aggregate a
record that must appear exactly once.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from pyspark.sql.functions import count, window
from pyspark.sql.functions import sum as sum_

from checkpoint.crashpoints import PGID_ENV
from connectors.spark import register
from kafka_eos.spark_session import new_spark_session

# The brokers' default maximum: the sink refuses less than its restart budget needs (EOS002).
TRANSACTION_TIMEOUT_MS = "900000"
WINDOW_MS = 1000  # of event time: the feeder spaces records 1 ms apart


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--source-bootstrap", required=True)
    parser.add_argument("--sink-bootstrap", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--prefix", required=True, help="the sink's transactionalIdPrefix")
    parser.add_argument("--master", required=True)
    parser.add_argument("--max-offsets-per-trigger", type=int, required=True)
    parser.add_argument("--stop-when", required=True, help="stop the query once this file exists")
    args = parser.parse_args(argv)
    # A crash point in any process of the job (driver, executors, Python workers) kills it all.
    os.environ[PGID_ENV] = str(os.getpgrp())

    spark = new_spark_session(
        args.master,
        app_name="kafka-eos-chaos",
        conf={
            # The harness kills executors and workers on purpose: a task may fail more than
            # Spark's default 4 times over a run without anything being wrong.
            "spark.task.maxFailures": "20",
        },
    )
    register(spark)
    records = (
        spark.readStream.format("kafka-eos")
        .option("kafka.bootstrap.servers", args.source_bootstrap)
        .option("subscribe", args.input)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
        .load()
        .selectExpr(
            "CAST(key AS STRING) AS key",
            "CAST(CAST(value AS STRING) AS LONG) AS n",
            "timestamp",
        )
    )
    results = records.selectExpr("key", "concat('r:', CAST(n AS STRING)) AS value")
    aggregates = (
        records.withWatermark("timestamp", "0 seconds")
        .groupBy("key", window("timestamp", f"{WINDOW_MS} milliseconds"))
        .agg(count("*").alias("c"), sum_("n").alias("s"))
        .selectExpr(
            "key",
            "concat_ws(':', 'a', CAST(unix_millis(window.start) AS STRING), CAST(c AS STRING),"
            " CAST(s AS STRING)) AS value",
        )
    )
    query = (
        results.union(aggregates)
        .writeStream.format("kafka-eos")
        .option("kafka.bootstrap.servers", args.sink_bootstrap)
        .option("topic", args.output)
        .option("transactionalIdPrefix", args.prefix)
        .option("kafka.transaction.timeout.ms", TRANSACTION_TIMEOUT_MS)
        .option("checkpointLocation", args.checkpoint)
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    while query.isActive and not os.path.exists(args.stop_when):
        time.sleep(0.2)
    error = query.exception()
    query.stop()
    spark.stop()
    if error is not None:
        print(f"the query failed: {error}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
