"""Done-when of the source: a query reading a topic of many records, written in random
committed and aborted transactions of two producers that interleave in every partition, with
two forced restarts (the sink crashes in the middle of a batch, twice), delivers each
committed record exactly once, counted per key.

``KAFKA_EOS_SOURCE_SCALE_RECORDS`` sets the number of records (committed and aborted):
100,000 in ``make test``, where the count does not change what runs (the same transactions'
interleaving, batches and restarts, ten times smaller); ``make scale`` runs the source's
done-when of 1,000,000.
"""

from __future__ import annotations

import itertools
import os
import random
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer
from pyspark.sql import SparkSession

from integration_tests.source.conftest import (
    Batches,
    options_for,
    run_to_end,
    run_to_failure,
    start_stream,
)
from kafka_eos.cluster import KafkaCluster

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

RECORDS = int(os.environ.get("KAFKA_EOS_SOURCE_SCALE_RECORDS", "100000"))
PARTITIONS = 4
BATCHES = 10  # maxOffsetsPerTrigger is sized for about this many micro-batches
SEED = 20251122


def _write_transactions(bootstrap: str, topic: str, rng: random.Random) -> list[range]:
    """Write keys 0..RECORDS-1 in transactions of random size from two producers whose open
    transactions interleave record by record in the same partitions, about a third aborted
    (after a flush, so their records are in the log); return the committed key ranges."""
    producers = [
        Producer(
            {
                "bootstrap.servers": bootstrap,
                "transactional.id": f"scale-{uuid.uuid4().hex}",
                "linger.ms": 50,
                "queue.buffering.max.messages": 200_000,
            }
        )
        for _ in range(2)
    ]
    for producer in producers:
        producer.init_transactions(30)
    committed: list[range] = []
    first = 0
    while first < RECORDS:
        size = rng.randint(1, max(2, RECORDS // 50))
        middle, last = min(RECORDS, first + size), min(RECORDS, first + 2 * size)
        chunks = [range(first, middle), range(middle, last)]
        for producer in producers:
            producer.begin_transaction()
        for pair in itertools.zip_longest(*chunks):
            for producer, key in zip(producers, pair, strict=True):
                if key is not None:
                    _produce(producer, topic, key)
        for producer, keys in zip(producers, chunks, strict=True):
            assert producer.flush(120) == 0
            if rng.random() < 0.33:
                producer.abort_transaction(60)
            else:
                producer.commit_transaction(60)
                committed.append(keys)
        first = last
    return committed


def _produce(producer: Producer, topic: str, key: int) -> None:
    text = str(key).encode()
    while True:
        try:
            producer.produce(topic, key=text, value=text, partition=key % PARTITIONS)
            return
        except BufferError:
            producer.poll(0.05)


def test_exactly_once_under_aborted_transactions_and_two_restarts(
    source_spark: SparkSession, kafka: KafkaCluster, topic_factory, checkpoint: Path
) -> None:
    rng = random.Random(SEED)
    bootstrap, topic = kafka.bootstrap_servers, topic_factory(partitions=PARTITIONS)
    began = time.monotonic()
    committed = _write_transactions(bootstrap, topic, rng)
    written = time.monotonic()
    options = options_for(bootstrap, topic, maxOffsetsPerTrigger=str(RECORDS // BATCHES + 1))

    first_crash, second_crash = rng.randint(1, 3), rng.randint(5, 7)
    sink = Batches(fail_at=first_crash)
    assert f"batch {first_crash}" in run_to_failure(
        start_stream(source_spark, options, checkpoint, sink)
    )
    sink.fail_at = second_crash
    assert f"batch {second_crash}" in run_to_failure(
        start_stream(source_spark, options, checkpoint, sink)
    )
    run_to_end(start_stream(source_spark, options, checkpoint, sink))
    read = time.monotonic()

    sink.assert_exactly_once(key for keys in committed for key in keys)
    print(
        f"\n{RECORDS} records ({sum(map(len, committed))} committed) in {len(committed)} "
        f"committed transactions: written in {written - began:.0f} s, read in "
        f"{len(sink.by_id)} batches with 2 restarts in {read - written:.0f} s"
    )
