"""The pipeline under test, run as its own process so that a test can kill -9 it.

numbers 0..count-1 -> Spark -> kafka-eos sink (exactly-once) -> output topic, one record per
number with key = value = the number: a stream, or with ``--batch`` one batch write. The
numbers come from the test source, or with ``--input-topic`` from Kafka through the kafka-eos
source. ``KAFKA_EOS_CRASH_AT`` in the
environment picks the moment to die (``checkpoint.crashpoints``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from pyspark.sql import SparkSession

from checkpoint.crashpoints import PGID_ENV
from connectors.spark import register
from integration_tests import available_now
from integration_tests.numbers_source import NumbersSource
from kafka_eos.spark_session import new_spark_session

# With --avro, values are raw Avro of this schema, an option of the source and of the sink.
NUMBER_SCHEMA = {"type": "record", "name": "Number", "fields": [{"name": "n", "type": "long"}]}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--prefix", help="transactionalIdPrefix; without it, a drop-in's job")
    parser.add_argument("--count", type=int, default=300)
    parser.add_argument("--per-batch", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--input-topic", help="read it with the kafka-eos source instead")
    parser.add_argument("--option", action="append", default=[], help="sink option key=value")
    parser.add_argument("--stop-when", help="call query.stop() once this file exists")
    parser.add_argument("--avro", action="store_true", help="values are Avro {n: long}")
    parser.add_argument(
        "--batch", action="store_true", help="one batch write (df.write) of the numbers"
    )
    parser.add_argument("--sink-tasks", type=int, help="coalesce the stream into this many tasks")
    parser.add_argument("--conf", action="append", default=[], help="Spark setting key=value")
    parser.add_argument("--s3a", action="store_true", help="the S3A jars, for s3a:// checkpoints")
    args = parser.parse_args(argv)
    # Crash points anywhere (driver, JVM, Python workers) kill this job's whole group.
    os.environ[PGID_ENV] = str(os.getpgrp())

    conf = dict(setting.split("=", 1) for setting in args.conf)
    spark = new_spark_session(
        args.master, app_name="kafka-eos-sink-under-test", s3a=args.s3a, conf=conf
    )
    spark.dataSource.register(NumbersSource)
    register(spark)
    avro = {"valueFormat": "avro", "valueSchema": json.dumps(NUMBER_SCHEMA)} if args.avro else {}
    if args.batch:
        return _batch_write(spark, args)
    if args.input_topic:
        numbers = (
            spark.readStream.format("kafka-eos")
            .option("kafka.bootstrap.servers", args.bootstrap)
            .option("subscribe", args.input_topic)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", str(args.per_batch))
            .options(**avro)
            .load()
            .selectExpr("value.n AS n" if args.avro else "CAST(CAST(value AS STRING) AS LONG) AS n")
        )
    else:
        numbers = (
            spark.readStream.format("kafka-eos-test-numbers")
            .option("count", str(args.count))
            .option("perBatch", str(args.per_batch))
            .option("partitions", str(args.partitions))
            .load()
        )
    if args.sink_tasks:
        numbers = numbers.coalesce(args.sink_tasks)
    value = "named_struct('n', n) AS value" if args.avro else "CAST(n AS STRING) AS value"
    writer = (
        numbers.selectExpr("CAST(n AS STRING) AS key", value)
        .writeStream.format("kafka-eos")
        .options(**avro)
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("topic", args.topic)
        .option("checkpointLocation", args.checkpoint)
    )
    if args.prefix:  # else what a job written for Spark's sink sets: the sink's defaults
        writer = writer.option("transactionalIdPrefix", args.prefix).option(
            "kafka.transaction.timeout.ms", "900000"
        )
    for pair in args.option:
        key, _, value = pair.partition("=")
        writer = writer.option(key, value)
    query = available_now.start(writer)
    if args.stop_when:
        while query.isActive and not os.path.exists(args.stop_when):
            time.sleep(0.2)
        query.stop()  # what a user's stop does: mid-batch when the file came mid-batch
    available_now.wait(query)
    spark.stop()
    return 0


def _batch_write(spark: SparkSession, args: argparse.Namespace) -> int:
    """The numbers in ``--partitions`` tasks, written by one ``df.write``."""
    writer = (
        spark.range(args.count, numPartitions=args.partitions)
        .selectExpr("CAST(id AS STRING) AS key", "CAST(id AS STRING) AS value")
        .write.format("kafka-eos")
        .mode("append")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("topic", args.topic)
        .option("checkpointLocation", args.checkpoint)
    )
    if args.prefix:
        writer = writer.option("transactionalIdPrefix", args.prefix)
    for pair in args.option:
        key, _, value = pair.partition("=")
        writer = writer.option(key, value)
    writer.save()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
