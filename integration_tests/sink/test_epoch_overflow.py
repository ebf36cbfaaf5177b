"""A transactional id whose producer epoch runs out, on a real broker (issue 29, item 8).

An epoch is a 16-bit count. A coordinator that would move an id past 32,766 gives it a new
producer id at epoch 0 instead: at an InitProducerId under transactions V1, and also at the
EndTxn of a transaction at epoch 32,766 under V2, which bumps the epoch at every commit.
The V2 case is the one the sink must survive: the driver's EndTxn(commit) moves the id to a
new producer id, and a driver that dies before it confirms the batch sends the same EndTxn
again at its restart, naming a producer id and epoch that the describe no longer shows. The
coordinator remembers the previous producer id and answers success; the recovery must take
it, confirm the batch and go on, and the next batch's writer gets the new producer id.

The id is brought to epoch 32,765 with raw InitProducerIds (about 15 s): the writer's own
InitProducerId then opens batch 0's transaction at 32,766, the last epoch before the limit.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from kafka import errors as Errors
from kafka.net.compat import KafkaNetClient
from kafka.protocol.producer.transaction import InitProducerIdRequest

from checkpoint.model import Committable
from checkpoint.store import SnapshotStore
from checkpoint.two_phase_commit import TwoPhaseCommit
from connectors.kafka.fence import FENCE_INIT_PRODUCER_ID_VERSION
from connectors.kafka.sink.committer import KafkaCommitter
from connectors.kafka.sink.exactly_once_writer import ExactlyOnceWriter
from connectors.kafka.transactions import TransactionAdmin
from connectors.kafka.txn_state import TxnState
from integration_tests.conftest import create_topic
from integration_tests.sink.transactions import describe, values, wait_until_state
from kafka_eos.cluster import KafkaCluster

pytestmark = pytest.mark.kafka

LAST_EPOCH = 32_766  # Short.MAX_VALUE - 1: an id at this epoch is exhausted
_RETRIABLE = (
    Errors.ConcurrentTransactionsError,
    Errors.CoordinatorLoadInProgressError,
    Errors.CoordinatorNotAvailableError,
    Errors.NotCoordinatorError,
)


def _bump_to(bootstrap: str, tid: str, epoch: int) -> int:
    """InitProducerId on ``tid`` until its epoch is ``epoch``; returns its producer id. Each
    bumps the epoch by one; the single broker is every id's coordinator."""
    first = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid})
    first.init_transactions(60)  # also creates the transaction log
    del first
    net = KafkaNetClient(bootstrap_servers=bootstrap)
    try:
        net.check_version(timeout_ms=30_000)  # bootstraps: the metadata names the broker
        node = next(iter(net.cluster.brokers())).node_id
        deadline = time.monotonic() + 180
        while True:
            assert time.monotonic() < deadline, f"{tid} not at epoch {epoch} after 180 s"
            request = InitProducerIdRequest(
                transactional_id=tid,
                transaction_timeout_ms=60_000,
                producer_id=-1,
                producer_epoch=-1,
                version=FENCE_INIT_PRODUCER_ID_VERSION,
            )
            future = net.send(node, request)
            net.poll(future=future, timeout_ms=10_000)
            error = Errors.for_code(future.value.error_code)
            if error in _RETRIABLE:
                time.sleep(0.05)
                continue
            assert error is Errors.NoError, error
            if future.value.producer_epoch == epoch:
                return int(future.value.producer_id)
    finally:
        net.close()


class _DriverDiesAfterEndTxn(KafkaCommitter):
    """The driver's EndTxns reach the coordinator, then it dies before it confirms."""

    def commit_all(self, committables: Sequence[Committable]) -> list[tuple[str, Exception]]:
        assert super().commit_all(committables) == []
        raise _Died


class _Died(Exception):
    pass


def _batch(tag: str) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"value": [f"{tag}-{i}" for i in range(5)]})


def test_a_decided_batch_whose_commit_exhausts_the_epoch_is_recovered_exactly_once(
    versioned_kafka: KafkaCluster, admin: TransactionAdmin, tmp_path: Path
) -> None:
    bootstrap = versioned_kafka.bootstrap_servers
    topic = create_topic(bootstrap)
    config = {"bootstrap.servers": bootstrap, "transaction.timeout.ms": "60000"}
    tid = f"overflow-{uuid.uuid4().hex[:8]}-0"
    first_producer_id = _bump_to(bootstrap, tid, LAST_EPOCH - 1)
    store = SnapshotStore(tmp_path / "decisions")

    batch_0 = ExactlyOnceWriter(config, topic, [tid], 30.0).write_and_pre_commit(0, [_batch("a")])
    assert (batch_0.producer_id, batch_0.epoch) == (first_producer_id, LAST_EPOCH)
    dying = _DriverDiesAfterEndTxn(config, timeout_s=30)
    try:
        with pytest.raises(_Died):
            TwoPhaseCommit(store, dying).complete(0, [batch_0])
    finally:
        dying.close()
    assert store.checkpoint_ids() == [0] and not store.is_confirmed(0)
    # By state, not wait_until_committed: after the overflow the describe shows the new
    # producer id, which the commit oracle cannot take for this commit.
    now = wait_until_state(admin, tid, TxnState.COMPLETE_COMMIT)
    if admin.epoch_bumps_on_end_at(now.coordinator_id):
        # V2: the EndTxn moved the id on; the recovery names what the describe no longer shows.
        assert now.producer_id != first_producer_id and now.epoch == 0, now

    # The restarted driver's recovery sends the decided EndTxn again.
    committer = KafkaCommitter(config, timeout_s=30)
    try:
        assert TwoPhaseCommit(store, committer).recover_decided() == (0,)
        assert store.is_confirmed(0)
        wait_until_state(admin, tid, TxnState.COMPLETE_COMMIT)
        batch_1 = ExactlyOnceWriter(config, topic, [tid], 30.0).write_and_pre_commit(
            1, [_batch("b")]
        )
        # V2 moved the id at batch 0's EndTxn (epoch 0, and batch 1's InitProducerId bumps
        # it), V1 at batch 1's InitProducerId.
        assert batch_1.producer_id != first_producer_id
        assert batch_1.epoch in (0, 1), batch_1
        TwoPhaseCommit(store, committer).complete(1, [batch_1])
        wait_until_state(admin, tid, TxnState.COMPLETE_COMMIT)
    finally:
        committer.close()

    assert store.is_confirmed(1)
    assert describe(admin, tid).producer_id == batch_1.producer_id
    expected = Counter(_batch("a")["value"].to_pylist() + _batch("b")["value"].to_pylist())
    assert values(bootstrap, topic, "read_committed") == expected
    assert values(bootstrap, topic, "read_uncommitted") == expected
