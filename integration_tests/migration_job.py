"""A job written for Spark's Kafka connector, run with ``--format kafka`` (Spark's own) or
``--format kafka-eos`` (the same job with only the format's name changed), on one checkpoint.

Source and sink both take the format: Kafka topic ``--input`` -> ``key``, ``value`` ->
``--output``, 100 records a batch, ``Trigger.AvailableNow``.
"""

from __future__ import annotations

import argparse
import sys

from connectors.spark import register
from kafka_eos.spark_session import new_spark_session


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--format", choices=["kafka", "kafka-eos"], required=True)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--checkpoint", required=True)
    args = parser.parse_args(argv)
    spark = new_spark_session(app_name=f"migration-{args.format}", spark_kafka=True)
    register(spark)  # the development install: Spark's own lookup cannot see it
    query = (
        spark.readStream.format(args.format)
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.input)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "100")
        .load()
        .selectExpr("key", "value")
        .writeStream.format(args.format)
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("topic", args.output)
        .option("checkpointLocation", args.checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
