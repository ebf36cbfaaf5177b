"""One contender of ``kafka-eos bench --suite contenders``, in a fresh process: a Spark job
that reads the input with one format and writes it with another, as a new user would run it.

``python -m kafka_eos.bench.job --source kafka --sink kafka-eos --guarantee exactly_once ...``
prints one JSON line: the rows, the batches and the summed ``triggerExecution`` time of the
micro-batches (JVM start-up excluded), and when the first ended, as
``kafka_eos.bench.contenders`` and ``kafka_eos.bench.recovery`` read it. With
``--run-s``, the query runs on a 1 s processing-time trigger for that long instead, for the
latency measurement (``kafka_eos.bench.latency``).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from kafka_eos.bench.discard import DiscardDataSource
from kafka_eos.spark_session import new_spark_session

SOURCES = ("kafka", "kafka-eos")
PARTITIONS = 8  # of every input and output topic of the contenders
SINKS = (*SOURCES, "discard")


@dataclass(frozen=True)
class Input:
    """What every contender of one size reads: the same topic, records and trigger."""

    bootstrap: str
    topic: str
    records: int
    record_bytes: int
    max_offsets: int  # Spark's maxOffsetsPerTrigger; the plain loop's records per transaction
    workdir: Path


@dataclass(frozen=True)
class Measured:
    rows: int
    seconds: float
    rss: int  # the peak of the Python process that does the work; 0 where a JVM does it


@dataclass(frozen=True)
class SparkContender:
    """A Spark job in a fresh process (``kafka_eos.bench.job``), as a new user would run it."""

    name: str
    source: str
    sink: str
    guarantee: str = "exactly_once"  # the kafka-eos sink's

    @property
    def writes(self) -> bool:
        """False for the sink that drops its rows: its output is not counted."""
        return self.sink != "discard"


def job_command(
    contender: SparkContender, given: Input, output: str, checkpoint: Path
) -> list[str]:
    """This module's command line for one run of ``contender`` over ``given``."""
    return [
        sys.executable, "-m", "kafka_eos.bench.job", "--bootstrap", given.bootstrap,
        "--input-topic", given.topic, "--output-topic", output, "--checkpoint", str(checkpoint),
        "--source", contender.source, "--sink", contender.sink,
        "--guarantee", contender.guarantee, "--max-offsets-per-trigger", str(given.max_offsets),
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--input-topic", required=True)
    parser.add_argument("--output-topic", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--source", choices=SOURCES, required=True)
    parser.add_argument("--sink", choices=SINKS, required=True)
    parser.add_argument("--guarantee", default="exactly_once", help="the kafka-eos sink's")
    parser.add_argument("--max-offsets-per-trigger", type=int, required=True)
    parser.add_argument(
        "--run-s", type=float, help="a processing-time trigger of 1 s, stopped after this long"
    )
    args = parser.parse_args()

    spark = new_spark_session("local[2]", "kafka-eos-bench", spark_kafka=True)
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(DiscardDataSource)
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
                "first_batch_ended_s": _ended_s(progress[0]) if progress else None,
            }
        )
    )
    spark.stop()


def _ended_s(progress: dict) -> float:
    """When a micro-batch ended, in seconds since the epoch: its start plus its duration."""
    started = datetime.fromisoformat(progress["timestamp"]).timestamp()
    return started + progress["durationMs"]["triggerExecution"] / 1000


if __name__ == "__main__":
    main()
