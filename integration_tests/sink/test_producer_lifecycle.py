"""The task's producer never aborts its pre-committed transaction when its life ends.

A task pre-commits and returns; the driver commits later, from another process. In between,
the task's confluent-kafka producer is dropped and collected, or its Python worker exits or
is killed. Whatever way the producer's life ends, the transaction must still be Ongoing with
the committable's producer id and epoch, invisible to read_committed readers, and the driver's
KafkaCommitter must then make it visible exactly once. Only ``close()`` aborts it, which is
why the writer never calls it: the last test shows that.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Producer

from checkpoint.model import Committable
from connectors.kafka.sink.committer import KafkaCommitter
from connectors.kafka.sink.errors import TransactionLostError
from connectors.kafka.sink.exactly_once_writer import ExactlyOnceWriter
from connectors.kafka.sink.naming import TransactionalIdNaming
from connectors.kafka.sink.options import SinkOptions
from connectors.kafka.transactions import TransactionAdmin
from connectors.kafka.txn_state import TxnState
from integration_tests.conftest import create_topic
from integration_tests.sink.transactions import describe, standing, values, wait_until_committed
from kafka_eos.cluster import KafkaCluster

pytestmark = pytest.mark.kafka

PROJECT_ROOT = Path(__file__).resolve().parents[2]
RECORDS = 12
BATCH_ID = 1
OWNER = "0123abcd"

# A task that pre-commits in a worker process of its own, then ends as argv[4] says. With
# argv[5] == "keep" it still holds its producer when it ends (as a worker killed between the
# flush and the writer's return would), otherwise the writer has dropped it already.
CHILD_TASK = """
import json, os, signal, sys
import pyarrow as pa
from connectors.kafka.sink.exactly_once_writer import ExactlyOnceWriter

config, topic, tid, ending, keep = json.loads(sys.argv[1]), *sys.argv[2:6]

class Writer(ExactlyOnceWriter):
    def _open(self, topic):
        self.kept = super()._open(topic)
        return self.kept

batch = pa.RecordBatch.from_pydict(json.loads(sys.argv[6]))
writer = Writer(config, topic, [tid], 30.0)
committable = writer.write_and_pre_commit(1, [batch])
if keep != "keep":
    del writer.kept
print(json.dumps(committable.to_dict()), flush=True)
if ending == "sys.exit":
    sys.exit(0)
if ending == "os._exit":
    os._exit(0)
os.kill(os.getpid(), signal.SIGKILL)
"""


class _KeepsProducer(ExactlyOnceWriter):
    """The real writer, but the test keeps a reference to its producer, to drop it later."""

    kept: Producer | None = None
    cycle: object = None

    def _open(self, topic: str) -> Producer:
        self.kept = super()._open(topic)
        return self.kept


def sink_config(bootstrap: str, checkpoint: Path) -> tuple[dict[str, Any], str]:
    """The producer config and prefix exactly as the sink builds them from its options."""
    prefix = f"lifecycle-{uuid.uuid4().hex[:8]}"
    sink = SinkOptions.parse(
        {
            "kafka.bootstrap.servers": bootstrap,
            "kafka.transaction.timeout.ms": "60000",
            "transactionalIdPrefix": prefix,
            "checkpointLocation": str(checkpoint),
        }
    )
    return sink.producer_config, prefix


def task_input(tag: str) -> dict[str, list[str]]:
    return {
        "key": [f"key-{i}" for i in range(RECORDS)],
        "value": [f"{tag}-{i}" for i in range(RECORDS)],
    }


def assert_still_pre_committed(
    admin: TransactionAdmin, committable: Committable, watch_s: float = 1.0
) -> None:
    """The transaction stays the open one the task left, for a while: an abort sent by a
    producer on its way out would show as PrepareAbort within milliseconds."""
    deadline = time.monotonic() + watch_s
    while True:
        now = describe(admin, committable.transactional_id)
        assert standing(now) == (TxnState.ONGOING, committable.producer_id, committable.epoch), (
            f"the pre-committed transaction did not stay open: {now}"
        )
        assert now.partitions == committable.partitions
        if time.monotonic() >= deadline:
            return
        time.sleep(0.25)


def librdkafka_threads() -> int:
    """librdkafka's threads in this process (named ``rdk:*``): they end when the instance that
    started them is destroyed."""
    names = []
    for task in os.listdir("/proc/self/task"):
        with contextlib.suppress(FileNotFoundError):  # a thread that just ended
            names.append(Path(f"/proc/self/task/{task}/comm").read_text())
    return sum(name.startswith("rdk:") for name in names)


def pre_commit_in_this_process(
    config: dict[str, Any], topic: str, tid: str, keep_producer: bool
) -> Committable:
    """Ending (i): the writer returns and is dropped. With ``keep_producer``, a reference cycle
    keeps it and its producer alive until ``gc.collect()`` destroys them."""
    gc.collect()  # clients of earlier code that only a collection destroys
    before = librdkafka_threads()
    writer = _KeepsProducer(config, topic, [tid], 30.0)
    committable = writer.write_and_pre_commit(
        BATCH_ID, [pa.RecordBatch.from_pydict(task_input("task"))]
    )
    assert librdkafka_threads() > before  # the producer's threads
    if keep_producer:
        writer.cycle = writer
    else:
        writer.kept = None  # as the real writer: nothing refers to the producer any more
    del writer
    gc.collect()
    # Proof that librdkafka's instance was destroyed, not merely unreferenced.
    deadline = time.monotonic() + 10
    while librdkafka_threads() > before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert librdkafka_threads() <= before
    return committable


def pre_commit_in_a_worker(
    config: dict[str, Any], topic: str, tid: str, ending: str, keep_producer: bool
) -> Committable:
    """Endings (ii) and (iii): a worker process pre-commits, then exits or dies."""
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            CHILD_TASK,
            json.dumps(config),
            topic,
            tid,
            ending,
            "keep" if keep_producer else "drop",
            json.dumps(task_input("task")),
        ],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    expected_status = -signal.SIGKILL if ending == "SIGKILL" else 0
    assert child.returncode == expected_status, child.stderr[-3000:]
    return Committable.from_dict(json.loads(child.stdout.splitlines()[-1]))


@pytest.mark.parametrize(
    ("ending", "keep_producer"),
    [
        ("dropped-and-collected", False),
        ("dropped-and-collected", True),
        ("sys.exit", False),
        ("sys.exit", True),
        ("os._exit", False),
        ("SIGKILL", False),
        ("SIGKILL", True),
    ],
    ids=lambda value: {True: "producer-alive", False: "producer-dropped"}.get(value, value),
)
def test_the_end_of_the_producer_leaves_the_pre_commit_for_the_driver(
    versioned_kafka: KafkaCluster,
    admin: TransactionAdmin,
    tmp_path: Path,
    ending: str,
    keep_producer: bool,
) -> None:
    bootstrap = versioned_kafka.bootstrap_servers
    topic = create_topic(bootstrap, partitions=2)
    config, prefix = sink_config(bootstrap, tmp_path / "checkpoint")
    tid = TransactionalIdNaming(prefix, OWNER).transactional_id(0, 0)
    if ending == "dropped-and-collected":
        committable = pre_commit_in_this_process(config, topic, tid, keep_producer)
    else:
        committable = pre_commit_in_a_worker(config, topic, tid, ending, keep_producer)
    expected = Counter(task_input("task")["value"])
    assert committable.transactional_id == tid
    assert committable.record_count == RECORDS
    assert committable.producer_id >= 0 and committable.epoch >= 0

    assert_still_pre_committed(admin, committable)
    assert values(bootstrap, topic, "read_committed") == Counter()
    assert values(bootstrap, topic, "read_uncommitted") == expected  # written, not visible

    # The driver, another process than the task's: only the committable crosses over.
    committer = KafkaCommitter(config, timeout_s=30)
    try:
        committer.verify(BATCH_ID, [committable])
        committer.commit(committable)
        wait_until_committed(admin, committable)
        committer.commit(committable)  # re-driven after a crash: already committed is success
    finally:
        committer.close()
    assert values(bootstrap, topic, "read_committed") == expected


def test_close_aborts_the_open_transaction_which_is_why_the_writer_never_calls_it(
    versioned_kafka: KafkaCluster, admin: TransactionAdmin, tmp_path: Path
) -> None:
    """confluent-kafka's ``Producer.close()`` aborts the transaction in progress: after a
    pre-commit that is the loss of a batch the driver may already have decided."""
    bootstrap = versioned_kafka.bootstrap_servers
    topic = create_topic(bootstrap)
    config, prefix = sink_config(bootstrap, tmp_path / "checkpoint")
    tid = TransactionalIdNaming(prefix, OWNER).transactional_id(0, 0)
    producer = Producer({**config, "transactional.id": tid})
    producer.init_transactions(30)
    producer.begin_transaction()
    for value in task_input("closed")["value"]:
        producer.produce(topic, value=value.encode())
    assert producer.flush(30) == 0
    open_txn = describe(admin, tid)
    assert open_txn.state == TxnState.ONGOING
    committable = Committable(
        tid, open_txn.producer_id, open_txn.epoch, RECORDS, start_time_ms=open_txn.start_time_ms
    )

    producer.close()

    assert describe(admin, tid).state in (TxnState.PREPARE_ABORT, TxnState.COMPLETE_ABORT)
    assert values(bootstrap, topic, "read_uncommitted") == Counter(task_input("closed")["value"])
    committer = KafkaCommitter(config, timeout_s=30)
    try:
        with pytest.raises(TransactionLostError) as caught:
            committer.commit(committable)
    finally:
        committer.close()
    assert f"transaction {tid} (producer id {open_txn.producer_id}" in str(caught.value)
    assert "Abort" in caught.value.detail
    assert values(bootstrap, topic, "read_committed") == Counter()
