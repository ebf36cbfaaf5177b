"""A model of a Kafka cluster's transaction coordinators, behind the two clients the shipped
sink uses: confluent-kafka's ``Producer`` (the writer, in tasks; :class:`ModelProducer`) and
kafka-python's network (:class:`ModelNetwork`), under the real
:class:`~connectors.kafka.transactions.TransactionAdmin`, ``txn_coordinators.py``, ``end_txn.py``,
``fence.py`` and kafka-python's own ``KafkaNetClient`` and ``KafkaAdminClient``. Only the
property tests use it (``test_sink_properties.py``, ``test_kafka_model.py``); every claim it
stands in for is also tested on real Kafka in ``integration_tests/sink``.

What it keeps from the protocol (KIP-98, KIP-360, KIP-890, Kafka's TransactionCoordinator),
because the sink's correctness depends on it:

- three brokers; a transactional id's coordinator is the leader of its ``__transaction_state``
  partition (``abs(id.hashCode) % partitions``, Kafka's ``partitionFor``); leadership can move:
  the old leader answers NOT_COORDINATOR, the new one COORDINATOR_LOAD_IN_PROGRESS until it
  has loaded the partition (on the model clock), FindCoordinator names the new leader at once;
- each broker answers ApiVersions for its own binary (kafka-python's tables of 3.9 and 4.3)
  and its finalized ``transaction.version``: a V1 cluster runs 3.9 on broker 1 and 4.3 at
  level 0 on the others (a binary upgrade under way), a rolling upgrade moves one broker at a
  time (:meth:`KafkaModel.upgrade_next_broker`), so coordinators differ in version;
- EndTxn takes its rules from the request's version, as Kafka does: below v5 (V1) the epoch
  must match and stays; v5 (V2) ends the transaction at E + 1 and takes a retry at E once the
  id is at E + 1 (KIP-890's retry on epoch bump). A version above the broker's, or v5 where
  ``transaction.version`` is below 2, is refused (UNSUPPORTED_VERSION);
- an EndTxn, a fence or a timeout only *prepares* the end (PrepareCommit / PrepareAbort, the
  decision written to the log); the transaction completes once its markers are written. Markers
  are written at once unless the machine delays them (:meth:`KafkaModel.delay_markers`, a
  partition leader down); until then EndTxn and InitProducerId meeting the prepared state are
  answered CONCURRENT_TRANSACTIONS, as Kafka's coordinator does, and the producer's own calls
  wait (librdkafka retries them) while the model clock moves on;
- an output partition's leader can be offline as markers are written
  (:meth:`KafkaModel.take_offline`): a V2 coordinator then completes the transaction without
  that partition's marker (KAFKA-20734; the sink writes it: ``marker_repair.py``), any other
  waits for the leader. Nothing else about the partition is offline here: its producers write,
  and the sink's looks and markers reach it;
- ``InitProducerId`` on a transactional id bumps its epoch and fences the previous producer;
  on an Ongoing transaction it first aborts it (epoch E + 1, answering CONCURRENT_TRANSACTIONS
  to a fence), then hands out E + 2; named with a producer id and epoch (a fence, KIP-360), it
  checks the producer id always but the epoch only when no transaction is open (PRODUCER_FENCED
  for a stale one, KIP-588);
- the coordinator aborts a transaction older than its timeout, bumping the epoch;
- a transaction's start time outlives its end (and, on a 3.x broker, the next InitProducerId),
  so the sink can tell one transaction of an epoch from a later one;
- each output partition's log, as its leader (partition % 3) answers for it: a record per
  produced row and a control record per marker, each with its producer id and epoch; a
  producer's range stays open from its first record until a marker of the producer closes it,
  whichever transactions of the producer wrote into it meanwhile (a later one joins a range
  whose marker was skipped), so the last stable offset (ListOffsets), the open ranges
  (DescribeProducers) and the batch at an offset (Fetch) are what the sink's repair of skipped
  markers reads. WriteTxnMarkers closes the range as the coordinator's marker does, refused
  (INVALID_PRODUCER_EPOCH) below the producer's epoch on the partition, or at it for a marker of
  transaction version 2;
- what read_committed readers see (:attr:`KafkaModel.visible`) is read from those logs: the
  records of ranges closed by a COMMIT marker, so a COMMIT that closes a range an aborted
  transaction began makes its records visible, and an ABORT that closes one a committed
  transaction began hides them. A committed transaction's records in a range still open count
  as visible too: its markers are in flight, or skipped and owed (:meth:`KafkaModel.owed`),
  bound to be written by the sink before the next batch's tasks.

Not modelled: TRANSACTION_ABORTABLE (KIP-1050), which Kafka returns only to a producer's
Produce, AddPartitionsToTxn and TxnOffsetCommit, never to the requests the admin sends; group
coordinators, which stay on broker 1.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import kafka.errors as Errors
from checkpoint_faults import InjectedFailure
from confluent_kafka import KafkaError, KafkaException
from kafka.cluster import ClusterMetadata
from kafka.future import Future
from kafka.protocol.admin.transactions import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
)
from kafka.protocol.broker_version_data import BROKER_API_VERSIONS, BrokerVersionData
from kafka.protocol.consumer import (
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    CoordinatorType,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.producer.transaction import (
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from kafka.record.memory_records import MemoryRecordsBuilder
from kafka.structs import OffsetAndMetadata, TopicPartition

from checkpoint.testing import ManualClock
from connectors.kafka.txn_state import TxnDescription, TxnState

_OPEN = (TxnState.ONGOING, TxnState.EMPTY)
_PREPARED = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
Record = tuple[int, int, int]  # (batch, task partition, sequence): the same in every replay
Key = tuple[str, int, int]  # (transactional id, producer id, epoch)
BROKERS = (1, 2, 3)
TXN_PARTITIONS = 3  # of __transaction_state (Kafka's default is 50)
GROUP_COORDINATOR = 1
OUTPUT_PARTITIONS = 4  # of each output topic; the machine's tasks write partitions below it
V1_BINARY, V2_BINARY = (3, 9), (4, 3)


def partition_for(key: str, partitions: int = TXN_PARTITIONS) -> int:
    """Kafka's ``Utils.abs(key.hashCode) % partitions``: Java's String.hashCode (the ids are
    ASCII), and ``Utils.abs``, which maps Integer.MIN_VALUE to 0."""
    h = 0
    for ch in key:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    signed = h - (1 << 32) if h >= 1 << 31 else h
    return (0 if signed == -(1 << 31) else abs(signed)) % partitions


@dataclass
class _Id:
    producer_id: int
    epoch: int = 0
    state: TxnState = TxnState.EMPTY
    start_ms: int = -1
    timeout_ms: int = 60_000
    partitions: set[tuple[str, int]] = field(default_factory=set)
    markers_due_ms: int = 0  # while PrepareCommit / PrepareAbort: when its markers are written
    ending: Key | None = None  # the transaction last prepared: its markers are due


@dataclass(frozen=True)
class _Batch:
    """One batch of an output partition's log: a produced record of transaction ``key``, or
    a control record (``commit``: its marker's result)."""

    producer_id: int
    epoch: int
    record: Record | None = None
    key: Key | None = None
    commit: bool | None = None


@dataclass
class Broker:
    """One broker: its binary (the API versions it speaks) and the ``transaction.version`` it
    has seen finalized (a finalized level reaches brokers one at a time)."""

    node_id: int
    binary: tuple[int, int] = V2_BINARY
    transaction_version: int = 2

    def api_versions(self) -> dict[int, tuple[int, int]]:
        return BROKER_API_VERSIONS[self.binary]

    @property
    def v2(self) -> bool:
        return self.binary >= (4, 0) and self.transaction_version >= 2


class KafkaModel:
    """The coordinators of one cluster, and what read_committed readers see."""

    def __init__(self, *, v2: bool, clock: ManualClock) -> None:
        self.clock = clock  # seconds, as time.time
        self.brokers = {n: Broker(n) for n in BROKERS}
        self.v2 = v2
        self.leaders = [BROKERS[p % len(BROKERS)] for p in range(TXN_PARTITIONS)]
        self.loaded_at_ms = [0] * TXN_PARTITIONS  # a new leader loads its partition until then
        self.markers_delayed_until_ms = 0
        self._moves: list[list[Any]] = []  # [requests to go, partition, load_s]
        self.ids: dict[str, _Id] = {}
        self.groups: dict[str, dict[Any, Any]] = {}
        self.committed: set[Key] = set()
        self.aborted: set[Key] = set()
        self.timed_out: set[Key] = set()  # aborted by the coordinator's clock, not by a client
        self._next_producer_id = 1000
        # Per output partition: the batch at each offset, and each producer's open range
        # there: [start offset, latest epoch, last write ms].
        self.logs: dict[tuple[str, int], list[_Batch]] = {}
        self.open_ranges: dict[tuple[str, int], dict[int, list[int]]] = {}
        # Output partitions whose leader is offline as markers are written, until then (ms).
        self.offline_until_ms: dict[tuple[str, int], int] = {}
        self.skipped = 0  # markers a V2 coordinator skipped (KAFKA-20734)

    @property
    def v2(self) -> bool:
        """Whether every coordinator runs transactions V2."""
        return all(b.v2 for b in self.brokers.values())

    @v2.setter
    def v2(self, v2: bool) -> None:
        for b in self.brokers.values():
            b.binary = V2_BINARY if v2 or b.node_id != 1 else V1_BINARY
            b.transaction_version = 2 if v2 else 0

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    # -- the cluster's operators -------------------------------------------------------------

    def upgrade_next_broker(self, node: int) -> str:
        """One step of the rolling upgrade to V2: first the 3.9 broker restarts on 4.1 (its
        coordinators move away meanwhile); then ``transaction.version`` 2, once finalized
        (Kafka refuses to finalize it while a broker cannot speak it), reaches the brokers one
        at a time, ``node`` first if it has not got it yet."""
        old = [b for b in self.brokers.values() if b.binary < V2_BINARY]
        if old:
            broker = old[0]
            broker.binary = V2_BINARY
            for p, leader in enumerate(self.leaders):
                if leader == broker.node_id:
                    self.move_coordinator(p, load_s=1)
            return f"broker {broker.node_id} restarted on Kafka 4.1"
        behind = [b for b in self.brokers.values() if b.transaction_version < 2]
        broker = self.brokers[node] if self.brokers[node] in behind else behind[0]
        broker.transaction_version = 2
        return f"transaction.version 2 reached broker {broker.node_id}"

    def move_coordinator(self, partition: int, load_s: float, *, after: int = 0) -> None:
        """Leadership of a ``__transaction_state`` partition moves to the next broker, which
        loads the partition for ``load_s`` seconds; the transactions' state is kept (the log).
        With ``after``, the move lands just before the broker answers the ``after``-th request
        from now: between a client's lookup and its request, which then meets NOT_COORDINATOR."""
        if after:
            self._moves.append([after, partition, load_s])
            return
        self.settle()
        self.leaders[partition] = BROKERS[BROKERS.index(self.leaders[partition]) - 1]
        self.loaded_at_ms[partition] = self.now_ms() + int(load_s * 1000)

    def delay_markers(self, seconds: float) -> None:
        """The markers of every transaction ending in the next ``seconds`` wait until then (a
        partition leader is down): the ends stay PrepareCommit / PrepareAbort so long."""
        self.markers_delayed_until_ms = self.now_ms() + int(seconds * 1000)

    def take_offline(self, partition: tuple[str, int], seconds: float) -> None:
        """The leader of output partition ``partition`` is offline for markers for the next
        ``seconds``: a V2 coordinator completing a transaction meanwhile skips its marker
        there (KAFKA-20734), any other waits until then."""
        self.offline_until_ms[partition] = self.now_ms() + int(seconds * 1000)

    def calm(self) -> None:
        """The conditions that are not faults end: no move pending, every coordinator
        loaded, every delayed marker written, every output partition's leader back."""
        now = self.now_ms()
        self._moves.clear()
        self.offline_until_ms.clear()
        self.loaded_at_ms = [min(at, now) for at in self.loaded_at_ms]
        self.markers_delayed_until_ms = now
        for state in self.ids.values():
            if state.state in _PREPARED:
                state.markers_due_ms = min(state.markers_due_ms, now)
        self.settle()

    def markers_pending(self, tid: str | None = None) -> bool:
        """Whether a transaction's markers wait for their delay (:meth:`delay_markers`): those
        of ``tid``, or of any."""
        self.settle()
        states = self.ids.values() if tid is None else [self.ids[tid]] if tid in self.ids else []
        return any(s.state in _PREPARED for s in states)

    # -- producer side ---------------------------------------------------------------------

    def init_producer_id(self, tid: str, timeout_ms: int) -> tuple[int, int]:
        self.await_markers(tid)
        state = self.ids.get(tid)
        if state is None:
            self._next_producer_id += 1
            state = self.ids[tid] = _Id(self._next_producer_id)
        else:
            if state.state == TxnState.ONGOING:
                self._prepare(tid, state, commit=False, bump=True)  # fence: abort at E + 1
                self.await_markers(tid)
            state.epoch += 1
        state.state, state.timeout_ms = TxnState.EMPTY, timeout_ms
        if self.brokers[self.coordinator(tid)].binary >= (4, 0):
            state.start_ms = -1  # a 4.x coordinator forgets it; 3.x keeps the last one
        return state.producer_id, state.epoch

    def produce(self, tid: str, producer_id: int, epoch: int, partition: tuple[str, int],
                record: Record) -> None:  # fmt: skip
        self.await_markers(tid)
        state = self._owned(tid, producer_id, epoch)
        if state.state != TxnState.ONGOING:
            state.state, state.start_ms = TxnState.ONGOING, self.now_ms()
            state.partitions = set()
        state.partitions.add(partition)
        log = self.logs.setdefault(partition, [])
        opened = self.open_ranges.setdefault(partition, {})
        span = opened.setdefault(producer_id, [len(log), epoch, 0])
        span[1:] = [epoch, self.now_ms()]
        log.append(_Batch(producer_id, epoch, record, (tid, producer_id, epoch)))

    def _owned(self, tid: str, producer_id: int, epoch: int) -> _Id:
        state = self.ids[tid]
        if (state.producer_id, state.epoch) != (producer_id, epoch):
            raise KafkaException(KafkaError(KafkaError._FENCED, "fenced", fatal=True))
        return state

    def await_markers(self, tid: str) -> None:
        """A producer's request meeting a prepared end is answered CONCURRENT_TRANSACTIONS and
        retried by librdkafka until the markers are written: time passes until then."""
        self.settle()
        state = self.ids.get(tid)
        if state is not None and state.state in _PREPARED:
            self.clock.advance(max(0, state.markers_due_ms - self.now_ms()) / 1000)
            self.settle()

    # -- coordinator side ------------------------------------------------------------------

    def coordinator(self, tid: str) -> int:
        return self.leaders[partition_for(tid)]

    def not_coordinator(self, node: int, tid: str) -> type[Exception] | None:
        """Why ``node`` cannot answer for ``tid`` now, if it cannot."""
        p = partition_for(tid)
        if self.leaders[p] != node:
            return Errors.NotCoordinatorError
        if self.now_ms() < self.loaded_at_ms[p]:
            return Errors.CoordinatorLoadInProgressError
        return None

    def end_txn(
        self, tid: str, producer_id: int, epoch: int, commit: bool, *, v2: bool
    ) -> type[Exception]:
        """EndTxn, answered as Kafka's coordinator answers it: NoError, or its refusal.

        V1 (below v5): the epoch must match; a repeat of the decision that took effect
        succeeds, one that meets it still prepared is CONCURRENT_TRANSACTIONS. V2 (v5): the
        transaction ends at E + 1; a repeat with epoch E once the id is at E + 1 succeeds when
        the decision matches (the coordinator's retry on epoch bump), anything else is fenced
        or refused. Unknown ids are INVALID_PRODUCER_ID_MAPPING, as in Kafka.
        """
        self.settle()
        state = self.ids.get(tid)
        if state is None or state.producer_id != producer_id:
            return Errors.InvalidProducerIdMappingError
        prepared = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        retry = v2 and state.epoch == epoch + 1 and state.state not in _OPEN
        if state.epoch != epoch and not retry:
            return Errors.ProducerFencedError
        if state.state == TxnState.ONGOING:
            self._prepare(tid, state, commit, bump=v2)
            return Errors.NoError
        if state.state == prepared:
            return Errors.ConcurrentTransactionsError
        if state.state == done and (retry or not v2):
            return Errors.NoError
        if v2 and not commit and not retry and state.state not in _PREPARED:
            state.epoch += 1  # V2 aborts an ended or empty transaction: epoch + 1
            state.state = TxnState.COMPLETE_ABORT
            return Errors.NoError
        return Errors.InvalidTxnStateError

    def fence(self, tid: str, producer_id: int, epoch: int, timeout_ms: int) -> type[Exception]:
        """InitProducerId(tid, producer_id, epoch), answered as Kafka's coordinator does."""
        self.settle()
        state = self.ids.get(tid)
        if state is None:
            self.init_producer_id(tid, timeout_ms)
            return Errors.NoError
        if state.producer_id != producer_id:
            return Errors.InvalidProducerIdMappingError
        if state.state in _PREPARED:
            return Errors.ConcurrentTransactionsError
        if state.state == TxnState.ONGOING:  # no epoch check: whatever is open is fenced
            self._prepare(tid, state, commit=False, bump=True)
            return Errors.ConcurrentTransactionsError
        if state.epoch != epoch:
            return Errors.ProducerFencedError
        self.init_producer_id(tid, timeout_ms)
        return Errors.NoError

    def _prepare(self, tid: str, state: _Id, commit: bool, *, bump: bool) -> None:
        """The decision is in the log: PrepareCommit / PrepareAbort until the markers are
        written (:meth:`settle`). From here the outcome is fixed."""
        key = state.ending = (tid, state.producer_id, state.epoch)
        if commit:
            self.committed.add(key)
        else:
            self.aborted.add(key)
        state.state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        state.markers_due_ms = max(self.now_ms(), self.markers_delayed_until_ms)
        if bump:
            state.epoch += 1
        self.settle()

    def settle(self) -> None:
        """What the coordinators do on their own clock: write due markers, then abort every
        transaction older than its timeout (epoch + 1)."""
        now = self.now_ms()
        for tid, state in self.ids.items():
            if state.state not in _PREPARED or state.markers_due_ms > now:
                continue
            offline = [p for p in state.partitions if self.offline_until_ms.get(p, 0) > now]
            skips = self.brokers[self.coordinator(tid)].v2
            if offline and not skips:
                state.markers_due_ms = max(self.offline_until_ms[p] for p in offline)
                continue
            commit = state.state == TxnState.PREPARE_COMMIT
            state.state = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
            for partition in state.partitions:
                if partition in offline:
                    self.skipped += 1
                    continue
                self._close_range(partition, state.producer_id, state.epoch, commit)
        for tid, state in self.ids.items():
            if state.state == TxnState.ONGOING and now - state.start_ms > state.timeout_ms:
                self.timed_out.add((tid, state.producer_id, state.epoch))
                self._prepare(tid, state, commit=False, bump=True)

    def _close_range(self, partition: tuple[str, int], producer_id: int, epoch: int,
                     commit: bool) -> None:  # fmt: skip
        """A marker on ``partition``: it closes the producer's open range there, whichever
        transactions wrote into it."""
        self.open_ranges.get(partition, {}).pop(producer_id, None)
        self.logs.setdefault(partition, []).append(_Batch(producer_id, epoch, commit=commit))

    # -- what readers see ----------------------------------------------------------------------

    def _read_committed(self) -> tuple[list[_Batch], list[_Batch]]:
        """The produced batches of ranges closed by a COMMIT marker, and those of ranges
        still open."""
        closed: list[_Batch] = []
        still_open: list[_Batch] = []
        for log in self.logs.values():
            ranges: dict[int, list[_Batch]] = {}
            for b in log:
                if b.commit is None:
                    ranges.setdefault(b.producer_id, []).append(b)
                elif b.commit:
                    closed.extend(ranges.pop(b.producer_id, ()))
                else:
                    ranges.pop(b.producer_id, None)
            still_open.extend(b for range_ in ranges.values() for b in range_)
        return closed, still_open

    @property
    def visible(self) -> list[Record]:
        """What read_committed readers see, or will once the markers in flight or owed are
        written: every record a COMMIT closed, and a committed transaction's still open."""
        closed, still_open = self._read_committed()
        committed = [b for b in still_open if b.key in self.committed]
        return [b.record for b in (*closed, *committed) if b.record is not None]

    def aborted_but_visible(self) -> list[Key]:
        """Aborted transactions whose records a COMMIT marker made visible."""
        closed, _ = self._read_committed()
        return sorted({b.key for b in closed if b.key in self.aborted})

    def owed(self) -> list[Key]:
        """Committed transactions whose range a partition still holds open after the
        coordinator completed them: a COMMIT marker it skipped, which the sink must write."""
        _, still_open = self._read_committed()
        ending = {s.ending for s in self.ids.values() if s.state in _PREPARED}
        return sorted({b.key for b in still_open if b.key in self.committed} - ending)

    def describe(self, tid: str) -> TxnDescription | None:
        self.settle()
        state = self.ids.get(tid)
        if state is None:
            return None
        listed = state.state in (TxnState.ONGOING, *_PREPARED)
        return TxnDescription(
            tid, state.state, state.producer_id, state.epoch, self.coordinator(tid),
            state.timeout_ms, state.start_ms, tuple(sorted(state.partitions)) if listed else (),
        )  # fmt: skip

    # -- the wire ------------------------------------------------------------------------------

    def answer(self, node: int, request: Any) -> Any:
        """Broker ``node``'s response to ``request``, a kafka-python response object at the
        request's version."""
        for move in list(self._moves):
            move[0] -= 1
            if move[0] <= 0:
                self._moves.remove(move)
                self.move_coordinator(move[1], move[2])
        self.settle()
        handler = _HANDLERS[type(request).__name__]
        return handler(self, node, request, request.API_VERSION)

    def metadata(self) -> MetadataResponse:
        B = MetadataResponse.MetadataResponseBroker
        brokers = [B(version=12, node_id=n, host=f"broker{n}", port=9092, rack=None)
                   for n in BROKERS]  # fmt: skip
        return MetadataResponse(
            version=12, throttle_time_ms=0, brokers=brokers, cluster_id="model",
            controller_id=BROKERS[0], topics=[],
        )  # fmt: skip

    def _api_versions(self, node: int, _: Any, v: int) -> ApiVersionsResponse:
        broker = self.brokers[node]
        R = ApiVersionsResponse
        keys = [R.ApiVersion(version=v, api_key=k, min_version=lo, max_version=hi)
                for k, (lo, hi) in sorted(broker.api_versions().items())]  # fmt: skip
        features = [
            R.FinalizedFeatureKey(
                version=v, name="transaction.version",
                min_version_level=broker.transaction_version,
                max_version_level=broker.transaction_version,
            )
        ] if broker.binary >= (4, 0) and broker.transaction_version else []  # fmt: skip
        return R(version=v, error_code=0, api_keys=keys, throttle_time_ms=0,
                 finalized_features_epoch=1, finalized_features=features)  # fmt: skip

    def _find_coordinator(self, node: int, request: Any, v: int) -> FindCoordinatorResponse:
        def where(key: str) -> int:
            if request.key_type == CoordinatorType.TRANSACTION:
                return self.coordinator(key)
            return GROUP_COORDINATOR

        C = FindCoordinatorResponse.Coordinator
        return FindCoordinatorResponse(version=v, throttle_time_ms=0, coordinators=[
            C(version=v, key=key, node_id=where(key), host=f"broker{where(key)}", port=9092,
              error_code=0, error_message=None)
            for key in request.coordinator_keys
        ])  # fmt: skip

    def _describe_transactions(self, node: int, request: Any, v: int) -> Any:
        S = DescribeTransactionsResponse.TransactionState

        def one(tid: str) -> Any:
            error = self.not_coordinator(node, tid)
            d = None if error else self.describe(tid)
            if d is None:
                error = error or Errors.TransactionalIdNotFoundError
                return S(version=v, error_code=error.errno, transactional_id=tid,
                         transaction_state="", transaction_timeout_ms=0,
                         transaction_start_time_ms=-1, producer_id=-1, producer_epoch=-1,
                         topics=[])  # fmt: skip
            topics: dict[str, list[int]] = {}
            for topic, partition in d.partitions:
                topics.setdefault(topic, []).append(partition)
            return S(version=v, error_code=0, transactional_id=tid,
                     transaction_state=d.state.value, transaction_timeout_ms=d.timeout_ms,
                     transaction_start_time_ms=d.start_time_ms, producer_id=d.producer_id,
                     producer_epoch=d.epoch, topics=[
                         S.TopicData(version=v, topic=t, partitions=ps)
                         for t, ps in sorted(topics.items())
                     ])  # fmt: skip

        states = [one(tid) for tid in request.transactional_ids]
        return DescribeTransactionsResponse(
            version=v, throttle_time_ms=0, transaction_states=states
        )

    def _list_transactions(self, node: int, request: Any, v: int) -> Any:
        """This broker's transactions; COORDINATOR_LOAD_IN_PROGRESS while it loads one of its
        partitions, as Kafka's ``listTransactionStates`` answers."""
        led = [p for p, leader in enumerate(self.leaders) if leader == node]
        S = ListTransactionsResponse.TransactionState
        if any(self.now_ms() < self.loaded_at_ms[p] for p in led):
            return ListTransactionsResponse(
                version=v, throttle_time_ms=0, unknown_state_filters=[], transaction_states=[],
                error_code=Errors.CoordinatorLoadInProgressError.errno,
            )  # fmt: skip
        wanted = set(request.state_filters or ())
        states = [
            S(version=v, transactional_id=tid, producer_id=s.producer_id,
              transaction_state=s.state.value)
            for tid, s in sorted(self.ids.items())
            if partition_for(tid) in led and (not wanted or s.state.value in wanted)
        ]  # fmt: skip
        return ListTransactionsResponse(
            version=v, throttle_time_ms=0, error_code=0, unknown_state_filters=[],
            transaction_states=states,
        )  # fmt: skip

    def _end_txn(self, node: int, request: Any, v: int) -> EndTxnResponse:
        broker = self.brokers[node]
        error = self.not_coordinator(node, request.transactional_id)
        if error is None and (
            v > broker.api_versions()[EndTxnRequest.API_KEY][1]
            or (v >= 5 and broker.transaction_version < 2)
        ):
            error = Errors.UnsupportedVersionError
        if error is None:
            error = self.end_txn(
                request.transactional_id, request.producer_id, request.producer_epoch,
                request.committed, v2=v >= 5,
            )  # fmt: skip
        state = self.ids.get(request.transactional_id)
        return EndTxnResponse(
            version=v, throttle_time_ms=0, error_code=error.errno,
            producer_id=state.producer_id if state else -1,
            producer_epoch=state.epoch if state else -1,
        )  # fmt: skip

    def _init_producer_id(self, node: int, request: Any, v: int) -> InitProducerIdResponse:
        tid = request.transactional_id
        error = self.not_coordinator(node, tid) or self.fence(
            tid, request.producer_id, request.producer_epoch, request.transaction_timeout_ms
        )
        state = self.ids.get(tid)
        ok = error is Errors.NoError and state is not None
        return InitProducerIdResponse(
            version=v, throttle_time_ms=0, error_code=error.errno,
            producer_id=state.producer_id if ok and state else -1,
            producer_epoch=state.epoch if ok and state else -1,
        )  # fmt: skip

    def _offset_commit(self, node: int, request: Any, v: int) -> OffsetCommitResponse:
        stored = self.groups.setdefault(request.group_id, {})
        T = OffsetCommitResponse.OffsetCommitResponseTopic
        topics = []
        for topic in request.topics:
            for p in topic.partitions:
                stored[TopicPartition(topic.name, p.partition_index)] = OffsetAndMetadata(
                    p.committed_offset, p.committed_metadata, p.committed_leader_epoch
                )
            topics.append(T(version=v, name=topic.name, partitions=[
                T.OffsetCommitResponsePartition(version=v, partition_index=p.partition_index,
                                                error_code=0)
                for p in topic.partitions
            ]))  # fmt: skip
        return OffsetCommitResponse(version=v, throttle_time_ms=0, topics=topics)

    def _offset_fetch(self, node: int, request: Any, v: int) -> OffsetFetchResponse:
        G = OffsetFetchResponse.OffsetFetchResponseGroup
        T = G.OffsetFetchResponseTopics
        groups = []
        for group in request.groups:
            by_topic: dict[str, list[Any]] = {}
            for tp, o in sorted(self.groups.get(group.group_id, {}).items()):
                by_topic.setdefault(tp.topic, []).append(T.OffsetFetchResponsePartitions(
                    version=v, partition_index=tp.partition, committed_offset=o.offset,
                    committed_leader_epoch=o.leader_epoch, metadata=o.metadata, error_code=0,
                ))  # fmt: skip
            groups.append(G(version=v, group_id=group.group_id, error_code=0, topics=[
                T(version=v, name=t, partitions=ps) for t, ps in by_topic.items()
            ]))  # fmt: skip
        return OffsetFetchResponse(version=v, throttle_time_ms=0, groups=groups)

    # -- the output partitions, as their leaders answer -------------------------------------

    def _leader(self, partition: int) -> int:
        return BROKERS[partition % len(BROKERS)]

    def _metadata(self, node: int, request: Any, v: int) -> MetadataResponse:
        T = MetadataResponse.MetadataResponseTopic
        P = T.MetadataResponsePartition
        names = sorted({t.name for t in request.topics or ()} | {t for t, _ in self.logs})
        topics = [
            T(version=v, error_code=0, name=name, is_internal=False, partitions=[
                P(version=v, error_code=0, partition_index=p, leader_id=self._leader(p),
                  leader_epoch=0, replica_nodes=[self._leader(p)], isr_nodes=[self._leader(p)],
                  offline_replicas=[])
                for p in range(OUTPUT_PARTITIONS)
            ])
            for name in names
        ]  # fmt: skip
        response = self.metadata()
        response.topics = topics
        return response

    def last_stable_offset(self, partition: tuple[str, int]) -> int:
        opened = self.open_ranges.get(partition, {})
        return min((span[0] for span in opened.values()), default=len(self.logs.get(partition, ())))

    def _list_offsets(self, node: int, request: Any, v: int) -> Any:
        R = ListOffsetsResponse.ListOffsetsTopicResponse
        read_committed = request.isolation_level == 1
        topics = []
        for topic in request.topics:
            partitions = []
            for p in topic.partitions:
                tp = (topic.name, p.partition_index)
                end = len(self.logs.get(tp, ()))
                offset = self.last_stable_offset(tp) if read_committed else end
                error = 0 if self._leader(p.partition_index) == node else 6  # NOT_LEADER
                partitions.append(R.ListOffsetsPartitionResponse(
                    version=v, partition_index=p.partition_index, error_code=error,
                    old_style_offsets=[], timestamp=-1, offset=offset, leader_epoch=0,
                ))  # fmt: skip
            topics.append(R(version=v, name=topic.name, partitions=partitions))
        return ListOffsetsResponse(version=v, throttle_time_ms=0, topics=topics)

    def _describe_producers(self, node: int, request: Any, v: int) -> Any:
        T = DescribeProducersResponse.TopicResponse
        Pr = T.PartitionResponse
        S = Pr.ProducerState
        topics = []
        for topic in request.topics:
            partitions = []
            for index in topic.partition_indexes:
                opened = self.open_ranges.get((topic.name, index), {})
                partitions.append(Pr(version=v, partition_index=index, error_code=0,
                    error_message=None, active_producers=[
                        S(version=v, producer_id=pid, producer_epoch=epoch, last_sequence=0,
                          last_timestamp=last_ms, coordinator_epoch=0,
                          current_txn_start_offset=start)
                        for pid, (start, epoch, last_ms) in sorted(opened.items())
                    ]))  # fmt: skip
            topics.append(T(version=v, name=topic.name, partitions=partitions))
        return DescribeProducersResponse(version=v, throttle_time_ms=0, topics=topics)

    def _fetch(self, node: int, request: Any, v: int) -> Any:
        """The record batch at the fetch offset, one record long (the sink reads its header)."""
        R = FetchResponse.FetchableTopicResponse
        responses = []
        for topic in request.topics:
            partitions = []
            for p in topic.partitions:
                tp = (topic.topic, p.partition)
                log = self.logs.get(tp, [])
                records = b""
                if p.fetch_offset < len(log):
                    b = log[p.fetch_offset]
                    builder = MemoryRecordsBuilder(
                        magic=2, compression_type=0, batch_size=1024, offset=p.fetch_offset,
                        transactional=True, producer_id=b.producer_id, producer_epoch=b.epoch,
                        base_sequence=0,
                    )  # fmt: skip
                    builder.append(timestamp=self.now_ms(), key=None, value=b"", headers=[])
                    builder.close()
                    # The builder writes base offset 0 (the broker assigns offsets on append);
                    # a fetched batch carries its own, the batch header's first 8 bytes.
                    records = bytearray(builder.buffer())
                    struct.pack_into(">q", records, 0, p.fetch_offset)
                    records = bytes(records)
                error = 0 if p.fetch_offset <= len(log) else Errors.OffsetOutOfRangeError.errno
                partitions.append(R.PartitionData(
                    version=v, partition_index=p.partition, error_code=error,
                    high_watermark=len(log), last_stable_offset=self.last_stable_offset(tp),
                    log_start_offset=0, aborted_transactions=[], preferred_read_replica=-1,
                    records=records,
                ))  # fmt: skip
            responses.append(R(version=v, topic=topic.topic, partitions=partitions))
        return FetchResponse(version=v, throttle_time_ms=0, error_code=0, session_id=0,
                             responses=responses)  # fmt: skip

    def _write_txn_markers(self, node: int, request: Any, v: int) -> Any:
        """The leader appends each marker, as the coordinator's own: refused below the
        producer's latest epoch on the partition, and at it for a marker of transaction
        version 2 (it ends the transaction at E + 1, and one at E + 1 there is a later
        transaction's)."""
        R = WriteTxnMarkersResponse.WritableTxnMarkerResult
        T = R.WritableTxnMarkerTopicResult
        P = T.WritableTxnMarkerPartitionResult
        results = []
        for m in request.markers:
            topics = []
            for t in m.topics:
                partitions = []
                for index in t.partition_indexes:
                    tp = (t.name, index)
                    seen = max((b.epoch for b in self.logs.get(tp, ())
                                if b.producer_id == m.producer_id), default=-1)  # fmt: skip
                    late = m.producer_epoch <= seen if m.transaction_version >= 2 else (
                        m.producer_epoch < seen)  # fmt: skip
                    if self._leader(index) != node:
                        error = Errors.NotLeaderForPartitionError.errno
                    elif late:
                        error = Errors.InvalidProducerEpochError.errno
                    else:
                        error = 0
                        self._close_range(tp, m.producer_id, m.producer_epoch,
                                          m.transaction_result)  # fmt: skip
                    partitions.append(P(version=v, partition_index=index, error_code=error))
                topics.append(T(version=v, name=t.name, partitions=partitions))
            results.append(R(version=v, producer_id=m.producer_id, topics=topics))
        return WriteTxnMarkersResponse(version=v, markers=results)


_HANDLERS: dict[str, Callable[[KafkaModel, int, Any, int], Any]] = {
    WriteTxnMarkersRequest.__name__: KafkaModel._write_txn_markers,
    MetadataRequest.__name__: KafkaModel._metadata,
    ListOffsetsRequest.__name__: KafkaModel._list_offsets,
    DescribeProducersRequest.__name__: KafkaModel._describe_producers,
    FetchRequest.__name__: KafkaModel._fetch,
    ApiVersionsRequest.__name__: KafkaModel._api_versions,
    FindCoordinatorRequest.__name__: KafkaModel._find_coordinator,
    DescribeTransactionsRequest.__name__: KafkaModel._describe_transactions,
    ListTransactionsRequest.__name__: KafkaModel._list_transactions,
    EndTxnRequest.__name__: KafkaModel._end_txn,
    InitProducerIdRequest.__name__: KafkaModel._init_producer_id,
    OffsetCommitRequest.__name__: KafkaModel._offset_commit,
    OffsetFetchRequest.__name__: KafkaModel._offset_fetch,
}


def request_name(node: int, request: Any) -> str:
    """How the machine's faults name a request (``commit <id>`` for an EndTxn(commit), ...)."""
    if isinstance(request, EndTxnRequest):
        return f"{'commit' if request.committed else 'abort'} {request.transactional_id}"
    if isinstance(request, InitProducerIdRequest):
        return f"fence {request.transactional_id}"
    if isinstance(request, DescribeTransactionsRequest):
        return "describe"
    if isinstance(request, ListTransactionsRequest):
        return f"list {node}"
    if isinstance(request, ApiVersionsRequest):
        return f"versions {node}"
    if isinstance(request, FindCoordinatorRequest):
        return "find coordinator"
    if isinstance(request, MetadataRequest | ListOffsetsRequest | DescribeProducersRequest
                  | FetchRequest):  # fmt: skip
        return f"partition state {node}"
    if isinstance(request, WriteTxnMarkersRequest):
        return f"write markers {node}"
    return f"group offsets {node}"


Step = Callable[[str, Callable[[], Any]], Any]
# A poll takes time, however short its timeout: a wait that kafka-python rounds down to 0 ms
# must still bring a backoff's end nearer, or the model clock would stand still.
_POLL_MIN_S = 0.001


class ModelNetwork:
    """kafka-python's network below ``KafkaNetClient``: its connection manager and selector in
    one (``KafkaNetClient(net=..., manager=...)``, kafka-python's own seam), so that
    ``TransactionAdmin``, ``call_coordinators``, ``KafkaNetClient`` and ``KafkaAdminClient``
    run as shipped. Each request is answered by :meth:`KafkaModel.answer` inside ``step(name,
    effect)``, where the machine injects its faults: a crash propagates (the process dies), an
    :class:`InjectedFailure` before the effect is a connection that broke before the request
    went out (KafkaConnectionError), after it a lost answer: the request times out after the
    request timeout on the model clock (RequestTimedOutError, as kafka-python's connection
    fails it). ``observe`` hears of every request, error answer and fault (the machine's
    Hypothesis events, which show that each is exercised). Answers arrive at the next poll; a poll
    with nothing to deliver waits its timeout (at least a millisecond) on the model clock,
    never in real time."""

    def __init__(self, kafka: KafkaModel, step: Step, *, request_timeout_ms: int = 30_000,
                 bootstrap_servers: str = "model:9092",
                 observe: Callable[[str], None] = lambda what: None, **_: Any) -> None:  # fmt: skip
        self._kafka, self._step, self._observe = kafka, step, observe
        self._net = self  # KafkaAdminClient reads its selector from the manager
        self._timeout_s = request_timeout_ms / 1000
        self.cluster = ClusterMetadata(bootstrap_servers=bootstrap_servers)
        self._conns: dict[int, Any] = {}  # in-flight counts: _Batch keeps its own
        self.broker_version_data: BrokerVersionData | None = None
        self.bootstrapped = False
        self._ready: list[tuple[Future, Any]] = []
        self._lost: list[tuple[Future, float, int]] = []  # (future, times out at, node)

    @property
    def broker_version(self) -> tuple[int, ...] | None:
        return None if self.broker_version_data is None else self.broker_version_data.broker_version

    def bootstrap(self, timeout_ms: int | None = None, refresh: bool = True) -> None:
        """Metadata and the bootstrap broker's versions, which kafka-python uses for every
        broker (not routed through the faults: a client that cannot start is no sink state)."""
        versions = self._kafka.brokers[BROKERS[0]].api_versions()
        self.broker_version_data = BrokerVersionData(api_versions=versions)
        self.cluster.update_metadata(self._kafka.metadata())
        self.bootstrapped = True

    def least_loaded_node(self) -> int:
        return BROKERS[0]

    def send(self, request: Any, node_id: int | None = None, request_timeout_ms: Any = None
             ) -> Future:  # fmt: skip
        node = self.least_loaded_node() if node_id is None else node_id
        if node not in self._kafka.brokers:
            raise Errors.UnknownBrokerIdError(node)
        if request.API_VERSION is None:
            assert self.broker_version_data is not None
            request.API_VERSION = self.broker_version_data.api_version(request)
        future, taken = Future(), []

        def effect() -> Any:
            taken.append(True)
            return self._kafka.answer(node, request)

        api = type(request).__name__.removesuffix("Request")
        self._observe(f"{api} sent")
        try:
            response = self._step(request_name(node, request), effect)
        except InjectedFailure:
            if not taken:
                self._observe(f"{api}: connection broke before it went out")
                return future.failure(Errors.KafkaConnectionError(f"node {node}: broken pipe"))
            self._observe(f"{api}: answer lost")
            self._lost.append((future, self._kafka.clock() + self._timeout_s, node))
            return future
        for code in (
            getattr(response, "error_code", 0),
            *(getattr(s, "error_code", 0) for s in getattr(response, "transaction_states", ())),
        ):
            if code:
                self._observe(f"{api} answered {Errors.for_code(code).__name__}")
        self._ready.append((future, response))
        return future

    def poll(self, timeout_ms: float | None = None, future: Future | None = None) -> list[Any]:
        if self._ready:
            ready, self._ready = self._ready, []
            for done, response in ready:
                done.success(response)
            return []
        wait_s = max((timeout_ms or 0) / 1000, _POLL_MIN_S)
        if self._lost:
            wait_s = min(wait_s, max(0.0, min(t for _, t, _ in self._lost) - self._kafka.clock()))
        self._kafka.clock.advance(wait_s)
        now, lost = self._kafka.clock(), self._lost
        self._lost = [w for w in lost if w[1] > now]
        for timed_out, _, node in (w for w in lost if w[1] <= now):
            timed_out.failure(Errors.RequestTimedOutError(f"no answer from node {node}"))
        return []

    def run(self, coro: Callable[..., Any], *args: Any) -> Any:
        """KafkaAdminClient's calls: the coroutine runs on the caller's thread, each awaited
        request polled until answered or timed out."""
        task = coro(*args)
        while True:
            try:
                awaited = task.send(None)
            except StopIteration as stop:
                return stop.value
            while not awaited.is_done:
                self.poll(timeout_ms=self._timeout_s * 1000)

    def start(self) -> None:
        pass

    def stop(self, timeout_ms: int | None = None) -> None:
        pass

    def wakeup(self) -> None:
        pass

    def close(self, node_id: int | None = None) -> None:
        pass


class ModelProducer:
    """confluent-kafka's transactional ``Producer``, as far as the writer uses it: its local
    queue holds ``queue.buffering.max.messages`` records until a poll sends them, and
    ``produce_batch`` takes the partition for the whole call (confluent-kafka ignores a
    message's own) and refuses the tail that does not fit, as librdkafka does. It never ends
    its transaction: the writer leaves a failed one to the driver's fence, and ``purge`` only
    drops the local queue (librdkafka implements no transactions V2 either way)."""

    def __init__(self, kafka: KafkaModel, config: Mapping[str, Any]) -> None:
        self._kafka = kafka
        self._tid = str(config["transactional.id"])
        self._timeout_ms = int(config.get("transaction.timeout.ms", 60_000))
        self._stats_cb = config.get("stats_cb")
        self._on_delivery: Callable[..., None] = config["on_delivery"]
        self._only_errors = bool(config.get("delivery.report.only.error"))
        self._identity: tuple[int, int] | None = None
        self._written: set[tuple[str, int]] = set()  # partitions queued to, as librdkafka counts
        self._acked = False
        self._queued: list[tuple[str, int, Record]] = []
        self._queue_limit = int(config.get("queue.buffering.max.messages", 100_000))

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> None:
        """Metadata: only that the producer is connected matters here."""

    def init_transactions(self, timeout: float) -> None:
        self._identity = self._kafka.init_producer_id(self._tid, self._timeout_ms)

    def begin_transaction(self) -> None:
        assert self._identity is not None

    def produce(self, topic: str, *, value: bytes | None, key: bytes | None,
                partition: int = -1, **_: Any) -> None:  # fmt: skip
        if len(self._queued) >= self._queue_limit:
            raise BufferError("Local: Queue full")
        self._queued.append((topic, max(partition, 0), json_record(value)))
        self._written.add((topic, max(partition, 0)))

    def produce_batch(self, topic: str, messages: list[dict[str, Any]], partition: int = -1) -> int:
        for i, message in enumerate(messages):
            if len(self._queued) >= self._queue_limit:
                for refused in messages[i:]:
                    refused["_error"] = KafkaError(KafkaError._QUEUE_FULL)
                return i
            self._queued.append((topic, max(partition, 0), json_record(message["value"])))
            self._written.add((topic, max(partition, 0)))
        return len(messages)

    def poll(self, timeout: float = 0) -> int:
        assert self._identity is not None
        if self._stats_cb is not None:
            self._stats_cb(json.dumps(self._statistics()))
        queued, self._queued = self._queued, []
        self._acked = self._acked or bool(queued)
        for topic, partition, record in queued:
            try:
                self._kafka.produce(self._tid, *self._identity, (topic, partition), record)
            except KafkaException as exc:
                self._on_delivery(exc.args[0], None)
            else:
                if not self._only_errors:
                    self._on_delivery(None, _Delivered(topic, partition))
        return len(queued)

    def flush(self, timeout: float = 0) -> int:
        self.poll()
        return 0

    def _statistics(self) -> dict[str, Any]:
        """librdkafka's statistics, as far as the writer reads them."""
        assert self._identity is not None
        pid, epoch = self._identity
        topics: dict[str, Any] = {}
        for topic, partition in sorted(self._written):
            counts = {"partition": partition, "msgs": 1, "acked_msgid": int(self._acked)}
            topics.setdefault(topic, {"partitions": {}})["partitions"][str(partition)] = counts
        return {
            "eos": {"idemp_state": "Assigned", "producer_id": pid, "producer_epoch": epoch},
            "brokers": {"model/1": {"state": "UP"}},
            "topics": topics,
        }

    def purge(self, in_queue: bool = True, in_flight: bool = True, blocking: bool = True) -> None:
        """Drop the local queue: nothing of it reaches the model (none is in flight here)."""
        if in_queue:
            self._queued = []


@dataclass(frozen=True)
class _Delivered:
    _topic: str
    _partition: int

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition


def json_record(value: bytes | None) -> Record:
    batch, task, seq = json.loads(value or b"null")
    return (batch, task, seq)


class ModelGroups:
    """The group-offset calls of the owner registry."""

    def __init__(self, groups: dict[str, dict[Any, Any]]) -> None:
        self._groups = groups

    def alter_group_offsets(self, group: str, offsets: Mapping[Any, Any]) -> dict[Any, Any]:
        self._groups.setdefault(group, {}).update(offsets)
        return {tp: Errors.NoError for tp in offsets}

    def list_group_offsets(self, specs: Mapping[str, Any]) -> dict[str, dict[Any, Any]]:
        return {group: dict(self._groups.get(group, {})) for group in specs}
