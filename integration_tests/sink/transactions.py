"""Transaction checks shared by the sink's Kafka-only tests (no Spark)."""

from __future__ import annotations

import time
from collections import Counter

from confluent_kafka import Consumer, TopicPartition

from checkpoint.deadline import Deadline
from checkpoint.model import Committable
from connectors.kafka.sink.committer import KafkaCommitter
from connectors.kafka.transactions import TransactionAdmin
from connectors.kafka.txn_state import TxnDescription, TxnState
from kafka_eos.operations.drain import drain

# An aborted transaction is ended once its markers are written: (Complete)Abort, or fenced.
ENDING = (TxnState.ONGOING, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE)


def values(bootstrap: str, topic: str, isolation: str) -> Counter[str]:
    return Counter(r.value.decode() for r in drain(bootstrap, topic, isolation, timeout_s=30))


def describe(admin: TransactionAdmin, tid: str) -> TxnDescription:
    now = admin.describe([tid])[tid]
    assert now is not None, f"transactional id {tid} is unknown to its coordinator"
    return now


def standing(txn: TxnDescription) -> tuple[TxnState, int, int]:
    """Where a described transaction stands: its state, producer id and epoch."""
    return txn.state, txn.producer_id, txn.epoch


def wait_until_state(admin: TransactionAdmin, tid: str, state: TxnState) -> TxnDescription:
    """Until the id's transaction is in ``state``, whatever its producer id and epoch (a
    CompleteCommit or CompleteAbort means its markers are written); its description then."""
    deadline = Deadline(30)
    while (now := describe(admin, tid)).state != state:
        assert not deadline.expired(), f"{tid} not {state.value} after 30 s: {now}"
        time.sleep(0.1)
    return now


def wait_until_committed(admin: TransactionAdmin, committable: Committable) -> None:
    """EndTxn returns before the markers are written; read_committed needs the markers. The
    commit then found must be this one's, as the commit oracle takes it."""
    now = wait_until_state(admin, committable.transactional_id, TxnState.COMPLETE_COMMIT)
    bump_possible = admin.epoch_bumps_on_end_at(now.coordinator_id)
    assert now.is_commit_of(
        committable.producer_id, committable.epoch, bump_possible=bump_possible
    ), now


def commit_visibly(committer: KafkaCommitter, committable: Committable) -> None:
    """The driver's commit, then its markers: EndTxn is answered before they are written, and
    a read_committed drain that starts in between stops at the last stable offset below them
    (seen in CI: a drain right after the commit returned nothing)."""
    committer.commit(committable)
    wait_until_committed(committer.admin, committable)


def wait_until_ended(admin: TransactionAdmin, tid: str) -> None:
    """Until an abort's markers are written: a record sent before then joins the aborted
    transaction, one sent after follows its marker, and a read_committed drain is not held
    back at the transaction's start."""
    deadline = Deadline(30)
    while describe(admin, tid).state in ENDING:
        assert not deadline.expired(), f"{tid} still ending after 30 s"
        time.sleep(0.1)


def stable_and_end(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    """(last stable offset, high watermark) of a partition: equal unless a transaction is
    open on it, and a transaction that no coordinator tracks (a hanging one) keeps them apart
    for good."""
    offsets = []
    for isolation in ("read_committed", "read_uncommitted"):
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "none", "isolation.level": isolation}
        )
        try:
            _, end = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=10, cached=False
            )
        finally:
            consumer.close()
        offsets.append(end)
    return offsets[0], offsets[1]
