"""PyFlink as a contender of ``kafka-eos bench --suite contenders``: the same identity copy of
key and value, into Flink's ``KafkaSink`` with ``DeliveryGuarantee.EXACTLY_ONCE``.

It runs under its own virtualenv (``scripts/peers/setup.sh flink``): apache-flink pins apache-beam,
pyarrow and more, apart from ours. So it imports nothing from kafka-eos.

PyFlink's ``KafkaSource`` only hands the record's value to the stream (there is no key-and-value
deserializer in PyFlink, nor a byte-array one in the Java connector), so the input is read with
the same connector through a Table (``raw`` key and ``raw`` value formats: the bytes as they
are) and turned into a DataStream of ``Row(key, value)``; the sink writes field 0 as the key and
field 1 as the value. No Python function runs per record: the whole job is on the JVM.

It prints one JSON line: the rows (the input's end offsets, read before the job) and the job's
net runtime from ``JobExecutionResult``, which excludes the JVM's and the mini-cluster's start
as the Spark contenders exclude the JVM's. It includes the tasks' start (the sink probes for
lingering transactions, the source discovers its partitions: about 2 s here) and the final
checkpoint that commits the last transactions, which a bounded exactly-once job waits for.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import uuid
from pathlib import Path

from pyflink.common import Configuration
from pyflink.common.serialization import RowFieldExtractorSchema
from pyflink.datastream import CheckpointingMode, StreamExecutionEnvironment
from pyflink.datastream.connectors.base import DeliveryGuarantee
from pyflink.datastream.connectors.kafka import KafkaRecordSerializationSchema, KafkaSink
from pyflink.java_gateway import get_gateway
from pyflink.table import StreamTableEnvironment

TRANSACTION_TIMEOUT_MS = 60_000  # below the broker's transaction.max.timeout.ms (15 min)


def input_rows(bootstrap: str, topic: str) -> int:
    """The records in ``topic`` (end minus beginning offsets), read with the connector's own
    shaded kafka-clients through the JVM: this venv has no other Kafka client."""
    jvm = get_gateway().jvm
    kafka = jvm.org.apache.flink.kafka.shaded.org.apache.kafka
    properties = jvm.java.util.Properties()
    properties.setProperty("bootstrap.servers", bootstrap)
    deserializer = kafka.common.serialization.ByteArrayDeserializer
    consumer = kafka.clients.consumer.KafkaConsumer(properties, deserializer(), deserializer())
    try:
        partitions = jvm.java.util.ArrayList()
        for info in consumer.partitionsFor(topic):
            partitions.add(kafka.common.TopicPartition(topic, info.partition()))
        ends, starts = consumer.endOffsets(partitions), consumer.beginningOffsets(partitions)
        return sum(ends.get(p) - starts.get(p) for p in partitions)
    finally:
        consumer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--input-topic", required=True)
    parser.add_argument("--output-topic", required=True)
    parser.add_argument("--jars", required=True, type=Path, help="the Kafka SQL connector's dir")
    parser.add_argument("--checkpoint-interval-ms", type=int, default=1000)
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--transactional-id-prefix", default=f"bench-flink-{uuid.uuid4().hex[:8]}")
    parser.add_argument("--log-dir", type=Path, help="Flink's log; else in PyFlink's package dir")
    args = parser.parse_args()
    if args.log_dir:  # read when the JVM starts, below
        os.environ["FLINK_LOG_DIR"] = str(args.log_dir)

    config = Configuration()
    # Quiet, and no web UI: the benchmark reads nothing from it.
    config.set_string("rest.bind-port", "0")
    env = StreamExecutionEnvironment.get_execution_environment(config)
    env.add_jars(*(jar.resolve().as_uri() for jar in sorted(args.jars.glob("*.jar"))))
    env.set_parallelism(args.parallelism)
    env.enable_checkpointing(args.checkpoint_interval_ms, CheckpointingMode.EXACTLY_ONCE)
    tables = StreamTableEnvironment.create(env)
    rows = input_rows(args.bootstrap, args.input_topic)

    tables.execute_sql(f"""
        CREATE TABLE source (`key` BYTES, `value` BYTES) WITH (
            'connector' = 'kafka',
            'topic' = '{args.input_topic}',
            'properties.bootstrap.servers' = '{args.bootstrap}',
            'properties.group.id' = '{args.transactional_id_prefix}',
            'scan.startup.mode' = 'earliest-offset',
            'scan.bounded.mode' = 'latest-offset',
            'key.format' = 'raw',
            'key.fields' = 'key',
            'value.format' = 'raw',
            'value.fields-include' = 'EXCEPT_KEY'
        )""")
    records = tables.to_data_stream(tables.from_path("source"))
    serializer = (
        KafkaRecordSerializationSchema.builder()
        .set_topic(args.output_topic)
        .set_key_serialization_schema(RowFieldExtractorSchema(0))
        .set_value_serialization_schema(RowFieldExtractorSchema(1))
        .build()
    )
    sink = (
        KafkaSink.builder()
        .set_bootstrap_servers(args.bootstrap)
        .set_record_serializer(serializer)
        .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
        .set_transactional_id_prefix(args.transactional_id_prefix)
        .set_property("transaction.timeout.ms", str(TRANSACTION_TIMEOUT_MS))
        .build()
    )
    records.sink_to(sink)
    started = time.perf_counter()
    result = env.execute(f"kafka-eos bench: flink {args.input_topic} -> {args.output_topic}")
    wall = time.perf_counter() - started
    print(
        json.dumps(
            {
                "rows": rows,
                "seconds": result.get_net_runtime() / 1000,
                "how": "JobExecutionResult net runtime: tasks' start, copy, final checkpoint",
                "execute_seconds": round(wall, 3),
            }
        )
    )


if __name__ == "__main__":
    main()
