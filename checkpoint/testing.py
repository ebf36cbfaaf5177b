"""In-memory stand-ins for tests and examples; never used on a production path.

:class:`InMemoryBroker` behaves like Kafka's transaction coordinator seen through a
``read_committed`` consumer: records of a transaction become visible, all at once, only when it
commits. :class:`InMemoryParticipant` is the reference :class:`~checkpoint.participant.Participant`
on top of it, and the model connector authors can compare a Kafka sink with.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from checkpoint.errors import KafkaEosError, ParticipantFenced, ProtocolError
from checkpoint.model import CheckpointId, Committable, TopicPartition
from checkpoint.participant import commit_each


class ManualClock:
    """A monotonic clock that moves only when told, so timeout tests never sleep."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"a monotonic clock cannot go back: advance({seconds})")
        self.now += seconds


class TransactionState(StrEnum):
    OPEN = "open"
    PREPARED = "prepared"  # pre-committed: flushed, waiting for the decision
    COMMITTED = "committed"
    ABORTED = "aborted"


class TransactionError(KafkaEosError):
    """An invalid transition, e.g. committing an aborted transaction (that would be data loss)."""

    code = "KAFKA_EOS.TESTING.INVALID_TRANSITION"


@dataclass
class Transaction:
    transactional_id: str
    producer_id: int
    epoch: int
    checkpoint_id: CheckpointId
    state: TransactionState = TransactionState.OPEN
    records: list[Any] = field(default_factory=list)
    partitions: set[TopicPartition] = field(default_factory=set)

    @property
    def key(self) -> tuple[str, int, int]:
        return (self.transactional_id, self.producer_id, self.epoch)


class InMemoryBroker:
    """Transactions by (transactional id, producer id, epoch) plus the read_committed log.

    ``listeners`` are called with each transaction just before its records become visible;
    property tests use them to check that a durable decision exists at that instant.
    """

    def __init__(self) -> None:
        self.visible: list[Any] = []
        self.listeners: list[Callable[[Transaction], None]] = []
        self._transactions: dict[tuple[str, int, int], Transaction] = {}
        self._newest: dict[str, Transaction] = {}
        self._producer_ids: dict[str, int] = {}

    def begin(self, transactional_id: str, checkpoint_id: CheckpointId) -> Transaction:
        """Init and begin: like Kafka's ``initTransactions``, bumps the epoch and aborts the
        unfinished transaction of the previous instance with this id (fencing it)."""
        previous = self._newest.get(transactional_id)
        if previous is not None and previous.state in _UNFINISHED:
            previous.state = TransactionState.ABORTED
        producer_id = self._producer_ids.setdefault(transactional_id, len(self._producer_ids))
        epoch = 0 if previous is None else previous.epoch + 1
        txn = Transaction(transactional_id, producer_id, epoch, checkpoint_id)
        self._transactions[txn.key] = self._newest[transactional_id] = txn
        return txn

    def write(self, key: tuple[str, int, int], record: Any, partition: TopicPartition) -> None:
        txn = self._live(key)
        txn.records.append(record)
        txn.partitions.add(partition)

    def prepare(self, key: tuple[str, int, int]) -> Transaction:
        txn = self._live(key)
        txn.state = TransactionState.PREPARED
        return txn

    def end(self, committable: Committable, *, commit: bool) -> None:
        """EndTxn by producer id and epoch: commit is idempotent, abort tolerates ended ones."""
        txn = self._transactions.get(committable.key)
        if txn is None:
            if commit:
                raise TransactionError(f"cannot commit unknown transaction {committable.key}")
            return
        if not commit:
            if txn.state in _UNFINISHED:
                txn.state = TransactionState.ABORTED
            return
        if txn.state is TransactionState.COMMITTED:
            return
        if txn.state is not TransactionState.PREPARED:
            raise TransactionError(
                f"cannot commit transaction {txn.key} in state {txn.state.value!r}: only a "
                "pre-committed transaction may commit"
            )
        for listener in self.listeners:
            listener(txn)
        txn.state = TransactionState.COMMITTED
        self.visible.extend(txn.records)

    def state_of(self, key: tuple[str, int, int]) -> TransactionState | None:
        txn = self._transactions.get(key)
        return None if txn is None else txn.state

    def transactions(self, prefix: str = "") -> list[Transaction]:
        return [t for t in self._transactions.values() if t.transactional_id.startswith(prefix)]

    def lingering(self, prefix: str = "") -> list[Transaction]:
        """Open or pre-committed transactions: they block read_committed consumers."""
        return [t for t in self.transactions(prefix) if t.state in _UNFINISHED]

    def _live(self, key: tuple[str, int, int]) -> Transaction:
        txn = self._transactions[key]
        if txn.state is not TransactionState.OPEN:
            raise ParticipantFenced(
                f"transaction {key} is {txn.state.value}: a newer instance or recovery took "
                "over this transactional id; this writer must stop"
            )
        return txn


_UNFINISHED = (TransactionState.OPEN, TransactionState.PREPARED)


class InMemoryParticipant:
    """Reference participant; transactional ids are ``f"{prefix}-{checkpoint_id}"``.

    As a committer its scope is every transactional id that starts with ``f"{prefix}-"``, so a
    driver-side instance named ``"app-sink"`` recovers tasks ``"app-sink-0"``, ``"app-sink-1"``.
    """

    def __init__(self, broker: InMemoryBroker, prefix: str) -> None:
        self.broker = broker
        self.prefix = prefix
        self._open: dict[CheckpointId, tuple[str, int, int]] = {}

    def begin_transaction(self, checkpoint_id: CheckpointId) -> None:
        txn = self.broker.begin(f"{self.prefix}-{checkpoint_id}", checkpoint_id)
        self._open[checkpoint_id] = txn.key

    def write(
        self, checkpoint_id: CheckpointId, record: Any, *, partition: TopicPartition = ("out", 0)
    ) -> None:
        self.broker.write(self._key(checkpoint_id), record, partition)

    def pre_commit(self, checkpoint_id: CheckpointId) -> Committable:
        txn = self.broker.prepare(self._key(checkpoint_id))
        del self._open[checkpoint_id]
        return Committable(
            txn.transactional_id,
            txn.producer_id,
            txn.epoch,
            len(txn.records),
            tuple(txn.partitions),
        )

    def commit(self, committable: Committable) -> None:
        self.broker.end(committable, commit=True)

    def abort(self, committable: Committable) -> None:
        self.broker.end(committable, commit=False)

    def commit_all(self, committables: Sequence[Committable]) -> list[tuple[str, Exception]]:
        return commit_each(self.commit, committables)

    def verify(self, checkpoint_id: CheckpointId, committables: Sequence[Committable]) -> None:
        for committable in committables:
            state = self.broker.state_of(committable.key)
            if state is not TransactionState.PREPARED:
                raise TransactionError(
                    f"checkpoint {checkpoint_id}: transaction {committable.key} is "
                    f"{'unknown' if state is None else state.value}, not pre-committed"
                )

    def abort_lingering(self, keep: Sequence[Committable]) -> None:
        kept = {c.key for c in keep}
        for txn in self.broker.lingering(f"{self.prefix}-"):
            if txn.key not in kept:
                self.abort(Committable(*txn.key, record_count=len(txn.records)))

    def _key(self, checkpoint_id: CheckpointId) -> tuple[str, int, int]:
        try:
            return self._open[checkpoint_id]
        except KeyError:
            raise ProtocolError(
                f"{self.prefix}: no open transaction for checkpoint {checkpoint_id}; call "
                "begin_transaction() first"
            ) from None
