"""A model of Kafka's transaction coordinator, behind the two client interfaces the shipped
sink uses: confluent-kafka's ``Producer`` (the writer, in tasks) and
:class:`~connectors.kafka.transactions.TransactionAdmin` (describe, list and EndTxn, on the
driver). Only the property tests use it (``test_sink_properties.py``); every claim it stands
in for is also tested on real Kafka in ``integration_tests/sink``.

What it keeps from the protocol, because the sink's correctness depends on it:

- ``InitProducerId`` on a transactional id bumps its epoch and fences the previous producer;
  on an Ongoing transaction it first aborts it (epoch E + 1), then hands out E + 2; named with
  a producer id and epoch (a fence, KIP-360), it checks the producer id always but the epoch
  only when no transaction is open, as Kafka's coordinator does;
- transactions V1 keep the epoch at EndTxn, V2 move it to E + 1 (KIP-890); a cluster may
  switch from V1 to V2 at any moment (a rolling upgrade);
- EndTxn names (transactional id, producer id, epoch), and is answered by the V1 or V2 rules
  of the coordinator (:meth:`KafkaModel.end_txn`): a repeat of a commit that took effect
  succeeds only where Kafka's does, so the sink's describe-based oracle is exercised;
- the coordinator aborts a transaction older than its timeout, bumping the epoch;
- a transaction's start time outlives its commit and its abort (and, under V1, the next
  InitProducerId), so the sink can tell one transaction of an epoch from a later one;
- records become visible to read_committed readers only at a commit.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import kafka.errors as Errors
from confluent_kafka import KafkaError, KafkaException

from checkpoint.deadline import Deadline
from connectors.kafka.coordinators import CoordinatorAnswer
from connectors.kafka.end_txn import EndTxnOutcome, EndTxnTarget
from connectors.kafka.fence import FenceOutcome, fence_all
from connectors.kafka.txn_state import TxnDescription, TxnState

_OPEN = (TxnState.ONGOING, TxnState.EMPTY)
Record = tuple[int, int, int]  # (batch, task partition, sequence): the same in every replay
Key = tuple[str, int, int]  # (transactional id, producer id, epoch)


@dataclass
class _Id:
    producer_id: int
    epoch: int = 0
    state: TxnState = TxnState.EMPTY
    start_ms: int = -1
    timeout_ms: int = 60_000
    partitions: set[tuple[str, int]] = field(default_factory=set)
    pending: list[Record] = field(default_factory=list)


class KafkaModel:
    """The coordinators of one cluster, and what read_committed readers see."""

    def __init__(self, *, v2: bool, clock: Callable[[], float]) -> None:
        self.v2 = v2
        self.clock = clock  # seconds, as time.time
        self.ids: dict[str, _Id] = {}
        self.visible: list[Record] = []
        self.committed: set[Key] = set()
        self.aborted: set[Key] = set()
        self.timed_out: set[Key] = set()  # aborted by the coordinator's clock, not by a client
        self._next_producer_id = 1000

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    # -- producer side ---------------------------------------------------------------------

    def init_producer_id(self, tid: str, timeout_ms: int) -> tuple[int, int]:
        self.expire()
        state = self.ids.get(tid)
        if state is None:
            self._next_producer_id += 1
            state = self.ids[tid] = _Id(self._next_producer_id)
        else:
            if state.state == TxnState.ONGOING:
                self._end(tid, state, commit=False, bump=True)  # fence: abort at E + 1
            state.epoch += 1
        state.state, state.timeout_ms = TxnState.EMPTY, timeout_ms
        if self.v2:
            state.start_ms = -1  # a 4.x coordinator forgets it; 3.x keeps the last one
        return state.producer_id, state.epoch

    def fence(self, tid: str, producer_id: int, epoch: int, timeout_ms: int) -> type[Exception]:
        """InitProducerId(tid, producer_id, epoch), answered as Kafka's coordinator does."""
        self.expire()
        state = self.ids.get(tid)
        if state is None:
            self.init_producer_id(tid, timeout_ms)
            return Errors.NoError
        if state.producer_id != producer_id:
            return Errors.InvalidProducerIdMappingError
        if state.state == TxnState.ONGOING:  # no epoch check: whatever is open is fenced
            self._end(tid, state, commit=False, bump=True)
            return Errors.ConcurrentTransactionsError
        if state.epoch != epoch:
            return Errors.InvalidProducerEpochError
        self.init_producer_id(tid, timeout_ms)
        return Errors.NoError

    def produce(self, tid: str, producer_id: int, epoch: int, partition: tuple[str, int],
                record: Record) -> None:  # fmt: skip
        self.expire()
        state = self._owned(tid, producer_id, epoch)
        if state.state != TxnState.ONGOING:
            state.state, state.start_ms = TxnState.ONGOING, self.now_ms()
            state.partitions, state.pending = set(), []
        state.partitions.add(partition)
        state.pending.append(record)

    def _owned(self, tid: str, producer_id: int, epoch: int) -> _Id:
        state = self.ids[tid]
        if (state.producer_id, state.epoch) != (producer_id, epoch):
            raise KafkaException(KafkaError(KafkaError._FENCED, "fenced", fatal=True))
        return state

    # -- admin side ------------------------------------------------------------------------

    def end_txn(self, tid: str, producer_id: int, epoch: int, commit: bool) -> type[Exception]:
        """EndTxn, answered as Kafka's coordinator answers it: NoError, or its refusal.

        V1 (EndTxn below v5): the epoch must match; a repeat of the decision that took effect
        succeeds. V2 (v5): the transaction ends at E + 1; a repeat with epoch E once the id is
        at E + 1 succeeds when the decision matches (the coordinator's retry on epoch bump),
        anything else is fenced or refused.
        """
        self.expire()
        state = self.ids.get(tid)
        if state is None:
            return Errors.TransactionalIdNotFoundError
        if state.producer_id != producer_id:
            return Errors.InvalidProducerIdMappingError
        done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        if not self.v2:
            if state.epoch != epoch:
                return Errors.ProducerFencedError
            if state.state == TxnState.ONGOING:
                self._end(tid, state, commit, bump=False)
                return Errors.NoError
            return Errors.NoError if state.state == done else Errors.InvalidTxnStateError
        retry = state.epoch == epoch + 1
        if state.epoch != epoch and not (retry and state.state not in _OPEN):
            return Errors.ProducerFencedError
        if state.state == TxnState.ONGOING:
            self._end(tid, state, commit, bump=True)
            return Errors.NoError
        if state.state == done and retry:
            return Errors.NoError
        if not commit and not retry:  # V2 aborts an ended or empty transaction: epoch + 1
            state.epoch += 1
            state.state = TxnState.COMPLETE_ABORT
            return Errors.NoError
        return Errors.InvalidTxnStateError

    def _end(self, tid: str, state: _Id, commit: bool, *, bump: bool) -> None:
        key = (tid, state.producer_id, state.epoch)
        if commit:
            self.visible.extend(state.pending)
            self.committed.add(key)
        else:
            self.aborted.add(key)
        state.pending = []
        state.state = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        if bump:
            state.epoch += 1

    def expire(self) -> None:
        """The coordinator aborts every transaction older than its timeout (epoch + 1)."""
        now = self.now_ms()
        for tid, state in self.ids.items():
            if state.state == TxnState.ONGOING and now - state.start_ms > state.timeout_ms:
                self.timed_out.add((tid, state.producer_id, state.epoch))
                self._end(tid, state, commit=False, bump=True)

    def describe(self, tid: str) -> TxnDescription | None:
        self.expire()
        state = self.ids.get(tid)
        if state is None:
            return None
        ongoing = state.state == TxnState.ONGOING
        return TxnDescription(
            tid, state.state, state.producer_id, state.epoch, 1, state.timeout_ms,
            state.start_ms, tuple(sorted(state.partitions)) if ongoing else (),
        )  # fmt: skip

    def open_keys(self) -> set[Key]:
        self.expire()
        return {(t, s.producer_id, s.epoch) for t, s in self.ids.items()
                if s.state == TxnState.ONGOING}  # fmt: skip


class ModelProducer:
    """confluent-kafka's transactional ``Producer``, as far as the writer uses it: its local
    queue holds ``queue.buffering.max.messages`` records until a poll sends them, and
    ``produce_batch`` takes the partition for the whole call (confluent-kafka ignores a
    message's own) and refuses the tail that does not fit, as librdkafka does."""

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

    def abort_transaction(self, timeout: float = 0) -> None:
        assert self._identity is not None
        error = self._kafka.end_txn(self._tid, *self._identity, commit=False)
        if error is not Errors.NoError:
            raise KafkaException(KafkaError(KafkaError._FENCED, error.__name__))


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


class ModelAdmin:
    """:class:`~connectors.kafka.transactions.TransactionAdmin`, as far as the committer and
    the writer use it. ``step(where, effect)`` runs each request (the property tests inject
    crashes and lost answers there)."""

    def __init__(self, kafka: KafkaModel, step: Callable[[str, Callable[[], Any]], Any]) -> None:
        self._kafka = kafka
        self._step = step
        self.groups: dict[str, dict[Any, Any]] = {}
        self.kafka_admin = ModelGroups(self.groups)

    def describe(self, transactional_ids: Iterable[str], *, deadline: Deadline | None = None
                 ) -> dict[str, TxnDescription | None]:  # fmt: skip
        ids = list(dict.fromkeys(transactional_ids))
        return self._step("describe", lambda: {tid: self._kafka.describe(tid) for tid in ids})

    def list_transactional_ids(self, prefix: str, *, ongoing_only: bool = True) -> list[str]:
        def listing() -> list[str]:
            self._kafka.expire()
            return sorted(
                tid for tid, s in self._kafka.ids.items()
                if tid.startswith(prefix) and (s.state == TxnState.ONGOING or not ongoing_only)
            )  # fmt: skip

        return self._step("list", listing)

    def end_transactions(self, targets: Sequence[EndTxnTarget], *, commit: bool,
                         deadline: Deadline) -> dict[str, EndTxnOutcome]:  # fmt: skip
        outcomes = {}
        for t in targets:
            verb = "commit" if commit else "abort"

            def end(t: EndTxnTarget = t) -> type[Exception]:
                return self._kafka.end_txn(t.transactional_id, t.producer_id, t.epoch, commit)

            try:
                error = self._step(f"{verb} {t.transactional_id}", end)
                answer = CoordinatorAnswer(error, None, coordinator_id=1, attempts=1)
            except LostAnswer:
                answer = CoordinatorAnswer(
                    Errors.RequestTimedOutError, None, timed_out=True, coordinator_id=1
                )
            outcomes[t.transactional_id] = EndTxnOutcome.of(t, commit, answer)
        return outcomes

    def fence_transactions(self, targets: Sequence[EndTxnTarget], *,
                           deadline: Deadline) -> dict[str, FenceOutcome]:  # fmt: skip
        """The shipped fence loop (:func:`~connectors.kafka.fence.fence_all`), on the model's
        describe and InitProducerId."""

        def describe(ids: list[str], bound: Deadline) -> Mapping[str, TxnDescription | None]:
            return self.describe(ids)

        def send_init(sent: Mapping[str, EndTxnTarget], timeouts: Mapping[str, int],
                      bound: Deadline) -> dict[str, CoordinatorAnswer]:  # fmt: skip
            answers = {}
            for tid, t in sent.items():

                def init(t: EndTxnTarget = t) -> type[Exception]:
                    tid = t.transactional_id
                    return self._kafka.fence(tid, t.producer_id, t.epoch, timeouts[tid])

                try:
                    error = self._step(f"fence {tid}", init)
                    answers[tid] = CoordinatorAnswer(error, None, coordinator_id=1, attempts=1)
                except LostAnswer:
                    answers[tid] = CoordinatorAnswer(
                        Errors.RequestTimedOutError, None, timed_out=True, coordinator_id=1
                    )
            return answers

        return fence_all(targets, describe, send_init, deadline, sleep=lambda seconds: None)

    def epoch_bumps_on_end_at(self, coordinator_id: int) -> bool:
        return self._kafka.v2

    def close(self) -> None:
        pass


class LostAnswer(Exception):
    """A request whose answer never came (it may or may not have taken effect)."""


class ModelGroups:
    """The group-offset calls of the owner registry."""

    def __init__(self, groups: dict[str, dict[Any, Any]]) -> None:
        self._groups = groups

    def alter_group_offsets(self, group: str, offsets: Mapping[Any, Any]) -> dict[Any, Any]:
        self._groups.setdefault(group, {}).update(offsets)
        return {tp: Errors.NoError for tp in offsets}

    def list_group_offsets(self, specs: Mapping[str, Any]) -> dict[str, dict[Any, Any]]:
        return {group: dict(self._groups.get(group, {})) for group in specs}
