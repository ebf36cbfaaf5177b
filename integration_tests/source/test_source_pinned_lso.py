"""A hanging transaction pins the LSO: the stream reader's driver side warns once it has been
pinned below the high watermark for longer than the broker's transaction.max.timeout.ms.

The broker's transaction.max.timeout.ms is 10 s here, and it looks for timed-out transactions
only every 300 s, so a transaction with the maximal timeout outlives the maximum, as a
hanging one does. The first test drives the driver side (``KafkaStreamReader.latestOffset``)
directly, as Spark's long-lived driver-side Python process does on each trigger, and reads its
log records; the second runs a real streaming query in a process of its own
(``pinned_lso_query.py``) and reads the warning from its stderr, where Spark passes on what its
Python worker logs.
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer
from pyspark.sql.streaming.datasource import ReadAllAvailable

from connectors.kafka.source import lag
from connectors.spark.source import KafkaStreamReader, source_schema
from integration_tests.conftest import KafkaFactory, create_topic
from integration_tests.source.conftest import options_for, produce

pytestmark = [pytest.mark.kafka]

MAX_TIMEOUT_MS = 10_000
DEADLINE_S = 50
QUERY_DEADLINE_S = 150  # Spark's start in a process of its own, then 10 s pinned and more
BROKER = {
    "transaction.max.timeout.ms": str(MAX_TIMEOUT_MS),
    # Well after every deadline here: the broker does not abort the transaction meanwhile.
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "300000",
}
WARNING = "the last stable offset has stayed at"


def test_a_transaction_open_longer_than_the_maximum_is_warned_of_once(
    kafka_factory: KafkaFactory, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    kafka = kafka_factory(broker_properties=BROKER)
    bootstrap = kafka.bootstrap_servers
    topic = create_topic(bootstrap)
    begun(bootstrap, topic, b"0", b"1").commit_transaction(30)  # offsets 0-1, marker 2
    hanging = begun(bootstrap, topic, b"open")  # offset 3: the LSO
    opened = time.monotonic()
    begun(bootstrap, topic, b"2").commit_transaction(30)  # committed after the open one
    produce(bootstrap, topic, [3, 4])

    monkeypatch.setattr(lag, "CHECK_INTERVAL_S", 1.0)
    options = options_for(bootstrap, topic)
    stream = KafkaStreamReader(options, source_schema(options))
    try:
        start = stream.initialOffset()
        warned: list[logging.LogRecord] = []
        with caplog.at_level(logging.WARNING, logger="connectors.spark.source"):
            while not warned and time.monotonic() - opened < DEADLINE_S:
                end = stream.latestOffset(start, ReadAllAvailable())
                assert end == {topic: {"0": 3}}  # held at the open transaction
                # Spark's progress gets the high watermark: "2" at 4, its marker at 5, and
                # the plain records at 6 and 7. The 5 offsets held back show as lag.
                assert stream.reportLatestOffset() == {topic: {"0": 8}}
                warned = [r for r in caplog.records if WARNING in r.message]
                time.sleep(1)
            pinned_for = time.monotonic() - opened
            for _ in range(3):  # once per pinned LSO, not every trigger
                stream.latestOffset(start, ReadAllAvailable())
        assert warned, f"no warning within {DEADLINE_S} s"
        assert pinned_for > MAX_TIMEOUT_MS / 1000
        [record] = [r for r in caplog.records if WARNING in r.message]
        message = record.getMessage()
        assert f"{topic}-0: the last stable offset has stayed at 3" in message
        assert "transaction.max.timeout.ms (10000 ms)" in message  # read from the broker
        assert f"`kafka-eos txn list --bootstrap-servers {bootstrap}`" in message
    finally:
        stream.stop()
        with contextlib.suppress(KafkaException):
            hanging.abort_transaction(30)


@pytest.mark.spark
def test_a_streaming_query_logs_the_warning_to_the_driver(
    kafka_factory: KafkaFactory, tmp_path: Path
) -> None:
    kafka = kafka_factory(broker_properties=BROKER)
    bootstrap = kafka.bootstrap_servers
    topic = create_topic(bootstrap)
    begun(bootstrap, topic, b"0").commit_transaction(30)  # offset 0, marker 1
    hanging = begun(bootstrap, topic, b"open")  # offset 2: the LSO
    begun(bootstrap, topic, b"1").commit_transaction(30)
    stop = tmp_path / "stop"
    command = [sys.executable, "-m", "integration_tests.source.pinned_lso_query", bootstrap]
    command += [topic, str(tmp_path / "checkpoint"), str(stop)]
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    child = subprocess.Popen(command, cwd=root, env=env, stderr=subprocess.PIPE, text=True)
    assert child.stderr is not None
    lines: list[str] = []
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(child.stderr, selectors.EVENT_READ)
            began = time.monotonic()
            while time.monotonic() - began < QUERY_DEADLINE_S and child.poll() is None:
                if selector.select(timeout=1.0):
                    line = child.stderr.readline()
                    lines.append(line)
                    if WARNING in line:
                        break
    finally:
        stop.touch()
        try:
            child.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            child.kill()
            child.communicate()
        with contextlib.suppress(KafkaException):
            hanging.abort_transaction(30)
    [warning] = [line for line in lines if WARNING in line] or [""]
    assert f"{topic}-0: the last stable offset has stayed at 2" in warning, "".join(lines[-40:])
    assert "transaction.max.timeout.ms (10000 ms)" in warning
    assert f"`kafka-eos txn list --bootstrap-servers {bootstrap}`" in warning


def begun(bootstrap: str, topic: str, *values: bytes) -> Producer:
    """A transaction of ``values`` with the broker's maximal timeout, flushed and left open."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"hang-{uuid.uuid4().hex}",
            "transaction.timeout.ms": MAX_TIMEOUT_MS,
        }
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(30) == 0
    return producer
