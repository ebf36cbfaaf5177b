"""Hanging transactions: open on a partition, and tracked by no coordinator.

A transaction's records are appended to each partition before the coordinator's markers end
them there. A record of a producer whose transaction the coordinator already ended (on a
broker without KIP-890's partition verification: before 3.6, or with
``transaction.partition.verification.enable=false``) opens a transaction on the partition
that no coordinator knows. No timeout ends it: the partition's last stable offset stays there
for good, and every ``read_committed`` reader of it stalls. ``kafka-eos txn list`` and ``txn
abort`` cannot see it (they ask the coordinators); it is found on the partitions themselves
(KIP-664), as Kafka's ``kafka-transactions.sh find-hanging`` finds it, and ended by writing
an abort marker to the partition, as ``kafka-transactions.sh abort --topic --partition
--start-offset`` does.

A transaction counts as hanging when a partition's leader reports it open
(DescribeProducers: a current transaction start offset), its producer's last write is older
than ``older_than_ms`` (by default the brokers' ``transaction.max.timeout.ms``: no live
transaction is older), and no coordinator holds a transaction of that producer id that is
open (or being ended) and includes the partition. That is judged only while every partition
of the transaction log has a leader: a coordinator that is offline answers nothing, and the
decided transaction whose markers it has yet to write would look hanging (aborting it would
lose part of a committed batch).

An abort marker is written only on positive evidence that it loses nothing committed: just
before it, the producer id's coordinator, asked again, shows the abort that ended that very
transaction (:func:`abort_refusal`), and the partition still shows it open. Anything else (the
id committed, moved on to a later transaction, expired, or rolled over to a new producer id) is
refused with its reason, unless the operator checked by hand and passes ``force``: a committed
transaction whose COMMIT marker never reached the partition (KAFKA-20734) looks hanging too.
That one gets its COMMIT marker instead (:func:`commit_hanging`), on the same kind of evidence:
its coordinator, under transactions V2, shows the commit that ended that very transaction.

Reports are built as the JSON-ready dicts below first, and printed second, as in
:mod:`kafka_eos.operations.lingering`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

import kafka.errors as Errors
from kafka.admin import AbortTransactionSpec, KafkaAdminClient
from kafka.structs import TopicPartition

from connectors.kafka.partition_txns import OpenOnPartition, open_on_partitions
from connectors.kafka.sink.lifetime import CLOCK_SKEW_TOLERANCE_MS
from connectors.kafka.sink.naming import OwnedId
from connectors.kafka.transactions import TransactionAdmin
from connectors.kafka.txn_state import TxnDescription, TxnState
from kafka_eos.operations.lingering import LingeringTransactionError

TRANSACTION_LOG = "__transaction_state"
# A coordinator transaction in one of these states still owns its partitions' open records:
# they are being written, or their markers are.
_TRACKED = frozenset(
    {
        TxnState.ONGOING,
        TxnState.PREPARE_COMMIT,
        TxnState.PREPARE_ABORT,
        TxnState.PREPARE_EPOCH_FENCE,
    }
)


@dataclass(frozen=True)
class Hanging:
    """An open transaction no coordinator tracks, and what its producer id's coordinator
    shows now (``coordinator``: None when no transactional id holds that producer id)."""

    open: OpenOnPartition
    coordinator: TxnDescription | None


class HangingDict(TypedDict):
    """JSON form of one hanging transaction."""

    topic: str
    partition: int
    start_offset: int
    producer_id: int
    producer_epoch: int
    last_write_ms: int
    age_s: float
    transactional_id: str | None  # the id its producer id had, if a coordinator knows it
    coordinator_state: str | None  # that id's state now
    committed: bool | None  # with --commit: whether its COMMIT marker was written
    aborted: bool | None  # with --abort: whether its abort marker was written
    error: str | None


class HangingReportDict(TypedDict):
    """JSON form of ``txn find-hanging --json``; version 1."""

    version: int
    older_than_ms: int
    partitions_checked: int
    hanging: list[HangingDict]


def partitions_of(admin: KafkaAdminClient, topics: Iterable[str]) -> list[TopicPartition]:
    """Every partition of ``topics``; a topic that cannot be described is an error."""
    found = []
    for topic in admin.describe_topics(list(topics)):
        name = topic["name"]
        if topic["error_code"]:
            error = Errors.for_code(topic["error_code"]).__name__
            raise LingeringTransactionError(
                f"--topic {name!r} cannot be described ({error}): check its name, and that "
                "this principal may DESCRIBE it"
            )
        found += [TopicPartition(name, p["partition_index"]) for p in topic["partitions"]]
    return sorted(found)


def find_hanging(
    admin: TransactionAdmin,
    partitions: Iterable[TopicPartition],
    *,
    older_than_ms: int,
    now_ms: int,
) -> list[Hanging]:
    """Every transaction open on ``partitions`` for longer than ``older_than_ms`` that no
    coordinator tracks."""
    _require_every_coordinator(admin.kafka_admin)
    candidates = [
        o
        for o in open_on_partitions(admin.kafka_admin, partitions)
        if now_ms - o.last_timestamp_ms >= older_than_ms
    ]
    if not candidates:
        return []
    by_producer = _coordinator_transactions(admin, {o.producer_id for o in candidates})
    hanging = []
    for o in candidates:
        described = by_producer.get(o.producer_id, [])
        tracked = any(
            d.state in _TRACKED and (o.topic, o.partition) in d.partitions for d in described
        )
        if not tracked:
            hanging.append(Hanging(o, described[0] if described else None))
    return hanging


def _require_every_coordinator(admin: KafkaAdminClient) -> None:
    """Refuse to judge while a partition of the transaction log has no leader: its
    transactions' coordinator answers nothing, and they would look hanging."""
    [log] = admin.describe_topics([TRANSACTION_LOG])
    if Errors.for_code(log["error_code"]) is Errors.UnknownTopicOrPartitionError:
        return  # no transaction was ever coordinated here
    leaderless = sorted(p["partition_index"] for p in log["partitions"] if p["leader_id"] < 0)
    if log["error_code"] or leaderless:
        raise LingeringTransactionError(
            f"{TRANSACTION_LOG} partitions {leaderless or 'all'} have no leader: the "
            "transactions they coordinate cannot be seen, and one whose markers are not yet "
            "written would look hanging (aborting it could drop part of a committed batch). "
            "Bring the brokers that hold them back first"
        )


def abort_refusal(o: OpenOnPartition, now: TxnDescription | None, *, bumps: bool) -> str | None:
    """Why an abort marker for ``o`` could lose a committed transaction, given what its
    producer id's coordinator shows ``now``; None only when it shows the abort that ended this
    very transaction: aborted at its epoch (an EndTxn that keeps it), or at the next where the
    coordinator moves the epoch on when it ends one (``bumps``: transactions V2; under V1 an
    abort at the next epoch is as likely the next transaction's own, after an
    ``init_transactions``), by a transaction that began no later than the producer's last write
    here (a later transaction of the id began after it)."""
    e = o.producer_epoch
    if now is None:
        return (
            f"no coordinator holds producer id {o.producer_id}: its transactional id expired, or "
            "rolled over to a new producer id (under transactions V2 a commit at epoch 32766 "
            "does that), so nothing shows that this transaction did not commit"
        )
    shows = f"{now.transactional_id} shows {now.state.value} at epoch {now.epoch}"
    if now.is_commit_of(o.producer_id, e, bump_possible=True):
        return (
            f"{shows}: if that commit is this transaction's, its COMMIT marker never reached "
            "this partition (KAFKA-20734; the brokers' logs say why), and an abort marker "
            "would lose it"
        )
    aborted = now.state in (TxnState.COMPLETE_ABORT, TxnState.PREPARE_ABORT)
    ending_epochs = (e, e + 1) if bumps else (e,)
    if not aborted or now.epoch not in ending_epochs or now.producer_id != o.producer_id:
        return f"{shows}, the open transaction is at epoch {e}: its id has moved on"
    if not 0 <= now.start_time_ms <= o.last_timestamp_ms:
        return (
            f"{shows}, but that transaction began after this producer's last write here: it "
            "is a later one, and its id has moved on"
        )
    return None


def commit_refusal(
    o: OpenOnPartition, now: TxnDescription, *, prefix: str, bumps: bool
) -> str | None:
    """Why a COMMIT marker for ``o`` could make records visible that were never committed, or
    None only when ``now`` shows this very transaction committed. That takes an id of the
    kafka-eos sink with ``transactionalIdPrefix`` = ``prefix``, at a coordinator that moves the
    epoch on when it ends a transaction (``bumps``: transactions V2), showing CompleteCommit of
    the same producer id at the next epoch. The sink's driver is the only one that commits its
    ids, with an EndTxn that moves the epoch on there, and every task attempt begins with
    ``init_transactions``, which moves it on too: so the commit at E + 1 ended the transaction
    whose records are at E, and nothing else. Other producers give no such evidence: under V1,
    or with a client whose EndTxn keeps the epoch (librdkafka's), a commit at E + 1 may be a
    later transaction's, and the open records an aborted one's or a late retry's."""
    owned = OwnedId.parse(now.transactional_id)
    if owned is None or owned.prefix != prefix:
        return f"{now.transactional_id} is not an id of a kafka-eos sink with prefix {prefix!r}"
    shows = f"{now.transactional_id} shows {now.state.value} at epoch {now.epoch}"
    if not bumps:
        return f"{shows}, at a coordinator of transactions V1, where the epoch tells no commit"
    if (now.producer_id, now.state, now.epoch) != (
        o.producer_id,
        TxnState.COMPLETE_COMMIT,
        o.producer_epoch + 1,
    ):
        return f"{shows}, not the commit of this transaction (epoch {o.producer_epoch})"
    if now.start_time_ms > o.last_timestamp_ms + CLOCK_SKEW_TOLERANCE_MS:
        # A later transaction of the id, committed before transactions V2 was finalized (its
        # EndTxn kept the epoch), over records of an earlier one that aborted (red team).
        return f"{shows}, of a transaction that began well after this producer's last write here"
    return None


def commit_hanging(admin: TransactionAdmin, hanging: Hanging, *, prefix: str) -> str | None:
    """Write the COMMIT marker its coordinator decided but never wrote to this partition
    (KAFKA-20734), or say why not; the coordinator and the partition are asked again first."""
    o = hanging.open
    now = _coordinator_view(admin, o.producer_id)
    if now is None:
        return f"not committed: no coordinator holds producer id {o.producer_id}"
    bumps = admin.epoch_bumps_on_end_at(now.coordinator_id)
    refused = commit_refusal(o, now, prefix=prefix, bumps=bumps)
    if refused is not None:
        return f"not committed: {refused}"
    if not still_open(admin.kafka_admin, hanging):
        return "not committed: no longer open on its partition"
    admin.write_commit_marker(
        TopicPartition(o.topic, o.partition), o.producer_id, now.epoch, o.coordinator_epoch
    )
    return None


def _coordinator_view(admin: TransactionAdmin, producer_id: int) -> TxnDescription | None:
    """What the coordinator shows now of the id that holds ``producer_id``, if one does."""
    return next(iter(_coordinator_transactions(admin, {producer_id})[producer_id]), None)


def still_open(admin: KafkaAdminClient, hanging: Hanging) -> bool:
    """The partition still reports the same transaction open (producer id, epoch, start
    offset): looked at again just before its marker, after the operator's confirmation."""
    o = hanging.open
    tp = TopicPartition(o.topic, o.partition)
    return any(
        (now.producer_id, now.producer_epoch, now.start_offset)
        == (o.producer_id, o.producer_epoch, o.start_offset)
        for now in open_on_partitions(admin, [tp])
    )


def _coordinator_transactions(
    admin: TransactionAdmin, producer_ids: set[int]
) -> Mapping[int, list[TxnDescription]]:
    """Per producer id, the coordinators' transactions that hold it (ListTransactions
    filtered by producer id, then described)."""
    listed = admin.kafka_admin.list_transactions(producer_id_filters=sorted(producer_ids))
    ids = sorted({t.transactional_id for per_broker in listed.values() for t in per_broker})
    by_producer: dict[int, list[TxnDescription]] = defaultdict(list)
    for description in admin.describe(ids).values():
        if description is not None:
            by_producer[description.producer_id].append(description)
    return by_producer


def abort_hanging(admin: TransactionAdmin, hanging: Hanging, *, force: bool = False) -> str | None:
    """Write an abort marker for the hanging transaction to its partition (WriteTxnMarkers,
    as ``kafka-transactions.sh abort`` does; the leader checks the producer id and epoch), or
    say why not. Its coordinator is asked again first (the operator may have taken minutes to
    confirm); ``force`` skips the lack of evidence, never a commit it shows nor the partition's
    own check."""
    o = hanging.open
    now = _coordinator_view(admin, o.producer_id)
    if now is not None and now.is_commit_of(o.producer_id, o.producer_epoch, bump_possible=True):
        # Positive evidence of a commit, which --force does not override (red team).
        return f"not aborted: {abort_refusal(o, now, bumps=True)}"
    if not force:
        bumps = now is not None and admin.epoch_bumps_on_end_at(now.coordinator_id)
        refused = abort_refusal(o, now, bumps=bumps)
        if refused is not None:
            return (
                f"not aborted: {refused}. Check its records from offset {o.start_offset} "
                "(read_uncommitted) against what should be in the output (a kafka-eos query: "
                "`kafka-eos txn resolve --checkpoint-location`), then pass --force to abort it"
            )
    if not still_open(admin.kafka_admin, hanging):
        return "not aborted: no longer open on its partition"
    admin.kafka_admin.abort_transaction(
        AbortTransactionSpec(
            TopicPartition(o.topic, o.partition),
            o.producer_id,
            o.producer_epoch,
            o.coordinator_epoch,
        )
    )
    return None


def hanging_dict(
    hanging: Hanging,
    now_ms: int,
    *,
    committed: bool | None = None,
    aborted: bool | None = None,
    error: str | None = None,
) -> HangingDict:
    o, now = hanging.open, hanging.coordinator
    return {
        "topic": o.topic,
        "partition": o.partition,
        "start_offset": o.start_offset,
        "producer_id": o.producer_id,
        "producer_epoch": o.producer_epoch,
        "last_write_ms": o.last_timestamp_ms,
        "age_s": max(0.0, (now_ms - o.last_timestamp_ms) / 1000),
        "transactional_id": None if now is None else now.transactional_id,
        "coordinator_state": None if now is None else now.state.value,
        "committed": committed,
        "aborted": aborted,
        "error": error,
    }


def hanging_report(
    entries: list[HangingDict], older_than_ms: int, partitions_checked: int
) -> HangingReportDict:
    return {
        "version": 1,
        "older_than_ms": older_than_ms,
        "partitions_checked": partitions_checked,
        "hanging": entries,
    }


def max_transaction_timeout_ms(config: Mapping[str, Any]) -> int:
    """The brokers' ``transaction.max.timeout.ms`` (Kafka's default when not read)."""
    return int(config.get("transaction.max.timeout.ms", 900_000))
