"""End-to-end latency of small batches: a record produced every 10 ms, a 1 s trigger, and the
time from its produce to its arrival at a ``read_committed`` consumer of the output.

The job (``kafka_eos.bench.job --run-s``) runs on a processing-time trigger of 1 s while this
process produces and reads. Each value carries its produce time; records produced in the
first ``warm_up_s`` (the JVM's start, the first batch) are left out.
"""

from __future__ import annotations

import subprocess
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, Producer

from connectors.kafka.client_config import LIBRDKAFKA_LOGGER
from kafka_eos.bench.job import PARTITIONS, Input, SparkContender, job_command
from kafka_eos.bench.pipeline import percentile
from kafka_eos.demo import create_topics

INTERVAL_S = 0.01


@dataclass(frozen=True)
class Latency:
    contender: str
    produced: int
    latencies_ms: tuple[float, ...]  # of the records produced after the warm-up

    def percentile(self, q: float) -> float:
        return percentile(self.latencies_ms, q)


def measure_latency(
    contender: SparkContender,
    bootstrap: str,
    workdir: Path,
    run_s: float = 75.0,
    warm_up_s: float = 30.0,
) -> Latency:
    suffix = uuid.uuid4().hex[:8]
    topic, output = f"latency-in-{suffix}", f"latency-out-{suffix}"
    create_topics(bootstrap, topic, output, partitions=PARTITIONS)
    given = Input(bootstrap, topic, 0, 0, 100_000, workdir)
    command = [*job_command(contender, given, output, workdir / output), "--run-s", str(run_s)]
    job = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    arrived: dict[int, float] = {}
    stop = threading.Event()
    reader = threading.Thread(target=_read, args=(bootstrap, output, arrived, stop), daemon=True)
    reader.start()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0,
                         "logger": LIBRDKAFKA_LOGGER})  # fmt: skip
    started = time.time()
    sent: dict[int, float] = {}
    n = 0
    while job.poll() is None and time.time() - started < run_s + 30:
        now = time.time()
        sent[n] = now
        producer.produce(topic, key=str(n).encode(), value=str(n).encode())
        producer.poll(0)
        n += 1
        time.sleep(max(0.0, INTERVAL_S - (time.time() - now)))
    producer.flush(30)
    _, stderr = job.communicate(timeout=120)
    time.sleep(2)  # the last batch's records, committed as the query stopped
    stop.set()
    reader.join()
    if job.returncode != 0:
        raise SystemExit(f"the latency job ({contender.name}) failed:\n{stderr[-4000:]}")
    after_warm_up = {i: at for i, at in sent.items() if at - started > warm_up_s}
    measured = tuple((arrived[i] - at) * 1000 for i, at in after_warm_up.items() if i in arrived)
    return Latency(contender.name, n, measured)


def _read(bootstrap: str, topic: str, arrived: dict[int, float], stop: threading.Event) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"latency-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "logger": LIBRDKAFKA_LOGGER,
        }
    )
    consumer.subscribe([topic])
    try:
        while not stop.is_set():
            for message in consumer.consume(1000, timeout=0.05):
                if message.error() is None and message.key() is not None:
                    arrived.setdefault(int(message.key()), time.time())
    finally:
        consumer.close()
