"""Whether a confirmed batch still owes a partition its COMMIT marker, and whether the sink may
write it: the judgement, without I/O (:mod:`connectors.kafka.sink.marker_repair` asks the
brokers).

A Kafka 4.x coordinator can complete a commit without writing its marker to a partition whose
leader was offline at that moment (KAFKA-20734). The records stay in the log, committed by the
coordinator, but the partition holds their transaction open: every ``read_committed`` reader of
it stops there, and a later transaction of the same producer that writes to it joins the open
range, so that its abort would drop the committed records with its own.

The sink writes the owed marker itself, before any task of the next batch runs, but only on
evidence that the marker commits exactly the decided transaction's records (each line below
is a check of :func:`judge`):

- the decision names the transaction (producer id P, epoch E, the partition) and was confirmed:
  its EndTxn(commit) was accepted, which no coordinator takes back;
- the partition's leader shows P's range open at epoch E, and the batch that opens the range is
  P's, at E, transactional: the range holds the decided records and nothing of another
  transaction of P (an earlier one whose marker was skipped too, or a later one that joined);
- the coordinator is done writing markers (not Prepare*), speaks transactions V2 (its commit
  moved the epoch to E + 1, so the marker goes at E + 1, which the leader refuses once a later
  transaction of P wrote there) and does not show that transaction aborted.

>>> from dataclasses import replace
>>> c = Committable("q-0", 7, 3, 10, (("out", 0),), start_time_ms=1_000)
>>> open_ = OpenOnPartition("out", 0, 7, 3, 0, 40, 1_500)
>>> first = BatchHeader(40, 7, 3, True)
>>> done = TxnDescription("q-0", TxnState.COMPLETE_COMMIT, 7, 4, 1, 60_000, 1_000, ())
>>> judge(c, open_, first, done, v2=True)
Repair(marker_epoch=4, coordinator_epoch=0)
>>> judge(c, open_, BatchHeader(40, 7, 5, True), done, v2=True)
Marked()
>>> judge(c, replace(open_, producer_epoch=5), first, done, v2=True).reason
<Reason.JOINED: 'joined'>
>>> judge(c, open_, first, replace(done, state=TxnState.PREPARE_COMMIT), v2=True)
Wait(reason=<Reason.COORDINATOR_PREPARING: 'coordinator-preparing'>)
>>> judge(c, open_, first, replace(done, epoch=3), v2=False).reason
<Reason.V1: 'v1'>
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from checkpoint.model import Committable
from connectors.kafka.partition_txns import BatchHeader, OpenOnPartition
from connectors.kafka.txn_state import TxnDescription, TxnState

# The highest producer epoch (a short); under V2 a commit that would reach it moves the id to
# a new producer id instead.
MAX_EPOCH = 32767
# The coordinator is still writing markers, or about to.
PREPARING = frozenset(
    {TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE}
)


class Reason(StrEnum):
    """Why an owed marker is not written now."""

    LEADER_OFFLINE = "leader-offline"  # the partition's leader does not answer: wait
    COORDINATOR_PREPARING = "coordinator-preparing"  # markers in flight: wait
    JOINED = "joined"  # another transaction of the producer wrote into the range
    V1 = "v1"  # transactions V1: the epoch does not tell this commit, no late-marker guard
    INCONSISTENT = "inconsistent"  # the brokers contradict the confirmed decision
    NOT_AUTHORIZED = "not-authorized"  # the sink's principal may not look or write
    UNSUPPORTED = "unsupported-broker"  # the leader takes no marker with KIP-1228's guard


@dataclass(frozen=True)
class Marked:
    """Nothing of the transaction is open on the partition: its marker is there."""


@dataclass(frozen=True)
class Wait:
    """Not judged yet: look again after a pause."""

    reason: Reason


@dataclass(frozen=True)
class Repair:
    """Write the COMMIT marker at ``marker_epoch``, with the partition's ``coordinator_epoch``."""

    marker_epoch: int
    coordinator_epoch: int


@dataclass(frozen=True)
class Stop:
    """No marker may be written without risking a loss or a duplicate: stop loudly."""

    reason: Reason
    detail: str


Verdict = Marked | Wait | Repair | Stop


def judge(
    c: Committable,
    open_: OpenOnPartition,
    first: BatchHeader | None,
    now: TxnDescription | None,
    *,
    v2: bool,
) -> Verdict:
    """What to do about producer ``c.producer_id``'s range open on ``open_``'s partition, one of
    ``c``'s: ``first`` is the batch at the range's start (None: no longer in the log), ``now``
    what ``c``'s coordinator shows of its id, ``v2`` whether that coordinator ends transactions
    with an epoch bump (transactions V2)."""
    e = c.epoch
    if open_.producer_epoch < e:
        return Marked()  # an older range of the producer, without this transaction's records
    if first is None:
        return Stop(
            Reason.INCONSISTENT,
            f"the range's first offset {open_.start_offset} is no longer in the log",
        )
    if first.base_offset != open_.start_offset:
        return Stop(
            Reason.INCONSISTENT,
            f"the log has no batch that begins at the range's first offset {open_.start_offset} "
            f"(the next begins at {first.base_offset})",
        )
    if first.producer_id != c.producer_id or not first.transactional or first.control:
        kind = (
            "a marker"
            if first.control
            else "transactional"
            if first.transactional
            else "not transactional"
        )
        return Stop(
            Reason.INCONSISTENT,
            f"the batch at offset {first.base_offset} is producer {first.producer_id}'s ({kind})",
        )
    if first.producer_epoch > e:
        return Marked()  # a later transaction's range, begun after this one's marker
    if first.producer_epoch < e:
        return Stop(
            Reason.JOINED,
            f"the open range begins with records of epoch {first.producer_epoch}, an earlier "
            f"transaction of the producer, and holds this one's (epoch {e}) too",
        )
    if open_.producer_epoch > e:
        return Stop(
            Reason.JOINED,
            f"a later transaction of the producer (epoch {open_.producer_epoch}, its last "
            f"write at {open_.last_timestamp_ms} ms) wrote into the range of the committed "
            "records: if it is aborted, by anyone or by its transaction.timeout.ms, its "
            "markers drop the committed records with its own",
        )
    if now is None:
        return Stop(Reason.INCONSISTENT, f"{c.transactional_id} is unknown to its coordinator")
    if now.state in PREPARING:
        return Wait(Reason.COORDINATOR_PREPARING)
    if (now.producer_id, now.epoch, now.state) == (c.producer_id, e, TxnState.ONGOING):
        return Stop(Reason.INCONSISTENT, "its coordinator still shows it open, at its epoch")
    if (now.producer_id, now.epoch, now.state) == (c.producer_id, e, TxnState.COMPLETE_COMMIT):
        # Committed at its own epoch: a V1 commit (a rolling upgrade finalized V2 since),
        # whose marker the leader would take however late.
        return Stop(Reason.V1, "its coordinator shows it committed at its own epoch (V1)")
    if now.is_abort_of(c.producer_id, e, c.start_time_ms):
        return Stop(
            Reason.INCONSISTENT,
            f"the coordinator shows this transaction {now.state.value} at epoch {now.epoch}",
        )
    if not v2:
        return Stop(
            Reason.V1,
            f"the coordinator ends transactions without an epoch bump (transactions V1): "
            f"{now.transactional_id} shows {now.state.value} at epoch {now.epoch}, which does "
            "not tell this commit from a later transaction's",
        )
    if e + 1 >= MAX_EPOCH:
        # The commit moved the id to a new producer id; which epoch its markers carried is
        # the coordinator's secret.
        return Stop(Reason.INCONSISTENT, f"the commit at epoch {e} exhausted the producer id")
    return Repair(e + 1, open_.coordinator_epoch)
