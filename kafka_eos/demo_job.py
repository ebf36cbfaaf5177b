"""The demo's pipeline: orders from Kafka -> Spark (parse, convert to EUR) -> Kafka, exactly once.

It runs as a process of its own (``python -m kafka_eos.demo_job``) so that the demo can kill -9
it in the middle of a two-phase commit and start it again, as a crash and a restart would.
Both ends are the ``kafka-eos`` format, with the option names of Spark's built-in ``kafka``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING

from checkpoint.crashpoints import PGID_ENV
from connectors.spark import register
from kafka_eos.spark_session import new_spark_session

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

ORDER_SCHEMA = "order_id STRING, amount_cents BIGINT, currency STRING"
# Fixed rates keep the output a pure function of the input, so a replay writes the same bytes.
EUR_PER_UNIT = {"EUR": 1.0, "USD": 0.92, "GBP": 1.17, "CHF": 1.05}
# The sink's transactions must outlive a restart (the linter's EOS002): the broker's default
# transaction.max.timeout.ms (15 minutes) is the most it allows.
TRANSACTION_TIMEOUT_MS = "900000"


def to_eur(orders: DataFrame) -> DataFrame:
    """Keep the key, convert the amount, and say where each result came from."""
    rate = " ".join(f"WHEN '{c}' THEN {r}" for c, r in EUR_PER_UNIT.items())
    return orders.selectExpr(
        "key",
        f"from_json(CAST(value AS STRING), '{ORDER_SCHEMA}') AS o",
        "topic",
        "partition",
        "offset",
    ).selectExpr(
        "key",
        "to_json(named_struct("
        "'order_id', o.order_id,"
        f" 'amount_eur_cents', CAST(round(o.amount_cents * CASE o.currency {rate} END) AS BIGINT),"
        " 'source', concat_ws('/', topic, CAST(partition AS STRING), CAST(offset AS STRING))"
        ")) AS value",
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--input", required=True, help="topic of orders")
    parser.add_argument("--output", required=True, help="topic of converted orders")
    parser.add_argument("--checkpoint", required=True, help="Spark checkpointLocation")
    parser.add_argument("--transactional-id-prefix", required=True)
    parser.add_argument("--max-offsets-per-trigger", type=int, default=1000)
    parser.add_argument("--master", default="local[*]")
    parser.add_argument(
        "--delivery-guarantee",
        choices=("exactly_once", "at_least_once", "none"),
        default="exactly_once",
    )
    args = parser.parse_args(argv)
    # A crash point (see checkpoint.crashpoints) kills the whole job: driver, JVM and workers.
    os.environ[PGID_ENV] = str(os.getpgrp())

    spark = new_spark_session(args.master, app_name="kafka-eos-demo")
    register(spark)
    orders = (
        spark.readStream.format("kafka-eos")
        .option("kafka.bootstrap.servers", args.bootstrap_servers)
        .option("subscribe", args.input)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
        .load()
    )
    query = (
        to_eur(orders)
        .writeStream.format("kafka-eos")
        .option("kafka.bootstrap.servers", args.bootstrap_servers)
        .option("topic", args.output)
        .option("deliveryGuarantee", args.delivery_guarantee)
        .option("transactionalIdPrefix", args.transactional_id_prefix)
        .option("kafka.transaction.timeout.ms", TRANSACTION_TIMEOUT_MS)
        .option("checkpointLocation", args.checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    progress = query.recentProgress
    spark.stop()
    # One JSON line for the demo and the benchmark: what ran and how long the batches took.
    summary = {
        "batches": len(progress),
        "rows": sum(p.numInputRows for p in progress),
        "trigger_ms": sum(p.durationMs.get("triggerExecution", 0) for p in progress),
        "add_batch_ms": sum(p.durationMs.get("addBatch", 0) for p in progress),
    }
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
