"""One contender of ``kafka-eos bench --suite contenders``, in a fresh process: a Spark job
that reads the input with one format and writes it with another, as a new user would run it.

``python -m kafka_eos.bench_job --source kafka --sink kafka-eos --guarantee exactly_once ...``
prints one JSON line: the rows, the batches and the summed ``triggerExecution`` time of the
micro-batches (JVM start-up excluded), as ``kafka_eos.bench_contenders`` reads it. With
``--run-s``, the query runs on a 1 s processing-time trigger for that long instead, for the
latency measurement (``kafka_eos.bench_latency``).
"""

from __future__ import annotations

import argparse
import json

from kafka_eos.spark_session import new_spark_session

FORMATS = ("kafka", "kafka-eos")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--input-topic", required=True)
    parser.add_argument("--output-topic", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--source", choices=FORMATS, required=True)
    parser.add_argument("--sink", choices=FORMATS, required=True)
    parser.add_argument("--guarantee", default="exactly_once", help="the kafka-eos sink's")
    parser.add_argument("--max-offsets-per-trigger", type=int, required=True)
    parser.add_argument(
        "--run-s", type=float, help="a processing-time trigger of 1 s, stopped after this long"
    )
    args = parser.parse_args()

    spark = new_spark_session("local[2]", "kafka-eos-bench", spark_kafka=True)
    spark.sparkContext.setLogLevel("ERROR")
    rows = (
        spark.readStream.format(args.source)
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.input_topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
        .load()
        .selectExpr("key", "value")
    )
    writer = (
        rows.writeStream.format(args.sink)
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("topic", args.output_topic)
        .option("checkpointLocation", args.checkpoint)
    )
    if args.sink == "kafka-eos":
        writer = writer.option("deliveryGuarantee", args.guarantee)
    if args.run_s is None:
        query = writer.trigger(availableNow=True).start()
        query.awaitTermination()
    else:  # the latency run: a small batch every second, while the bench produces
        query = writer.trigger(processingTime="1 second").start()
        query.awaitTermination(args.run_s)
        query.stop()
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    print(
        json.dumps(
            {
                "rows": sum(p["numInputRows"] for p in progress),
                "batches": len(progress),
                "trigger_ms": sum(p["durationMs"]["triggerExecution"] for p in progress),
            }
        )
    )
    spark.stop()


if __name__ == "__main__":
    main()
