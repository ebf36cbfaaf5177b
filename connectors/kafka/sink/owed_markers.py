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
Repair(marker_epoch=4, coordinator_epoch=0, commit=True, guarded=True)
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
from connectors.kafka.sink.lifetime import CLOCK_SKEW_TOLERANCE_MS
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
    """Write the marker at ``marker_epoch``, with the partition's ``coordinator_epoch``: the
    COMMIT marker, or with ``commit`` False the ABORT marker. ``guarded``: marked transaction
    version 2, as a V2 coordinator writes it, which the leader refuses once a later transaction
    of the producer is open there; a legacy marker is taken at any epoch not below it."""

    marker_epoch: int
    coordinator_epoch: int
    commit: bool = True
    guarded: bool = True


@dataclass(frozen=True)
class Leave:
    """Open, and ended by another step: the sweep of lingering transactions, which aborts this
    query's open ones after the tasks, or the transaction's own EndTxn."""


@dataclass(frozen=True)
class Stop:
    """No marker may be written without risking a loss or a duplicate: stop loudly."""

    reason: Reason
    detail: str


Verdict = Marked | Wait | Repair | Stop | Leave


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


def judge_abort(o: OpenOnPartition, now: TxnDescription | None, *, v2: bool) -> Verdict:
    """What to do about a range that a transaction the driver just fenced left open on one of
    its partitions (its producer, any epoch). A 4.x coordinator skips an ABORT marker as it
    skips a COMMIT marker (KAFKA-20734), and a later transaction of the id that writes to the
    partition then joins the aborted range: its COMMIT marker would make the aborted records
    visible, a duplicate of their replay. So the ABORT marker goes first.

    The evidence: the coordinator shows the id's producer aborted at E + 1, the epoch a fence
    of the range's epoch E moves it to, by a transaction begun no later than the range's last
    write (with the clocks' tolerance). Each attempt of a task takes its id with
    ``init_transactions``, which moves the epoch on, so one transaction of the id runs at E,
    and nothing but its end moves the id to E + 1: the abort is that transaction's. An abort
    at E itself (an EndTxn that keeps the epoch, under V1) is no evidence: its producer may
    have begun another transaction at E, whose records the marker would drop. The marker goes
    at E + 1, marked transaction version 2 under V2, as the coordinator writes it: the leader
    refuses either once a later transaction of the producer wrote there. Open at its
    coordinator at the range's epoch, it is a later transaction of the id that joined the
    range after the fence, and its own end (the next sweep's fence) ends the range; anything
    else stops.

    >>> o = OpenOnPartition("out", 0, 7, 3, 2, 40, 1_500)
    >>> aborted = TxnDescription("q-0", TxnState.COMPLETE_ABORT, 7, 4, 1, 60_000, 1_000, ())
    >>> judge_abort(o, aborted, v2=True)
    Repair(marker_epoch=4, coordinator_epoch=2, commit=False, guarded=True)
    >>> from dataclasses import replace
    >>> judge_abort(o, replace(aborted, epoch=3), v2=True).reason
    <Reason.INCONSISTENT: 'inconsistent'>
    >>> judge_abort(o, aborted, v2=False)
    Repair(marker_epoch=4, coordinator_epoch=2, commit=False, guarded=False)
    >>> judge_abort(o, replace(aborted, state=TxnState.ONGOING, epoch=3), v2=True)
    Leave()
    >>> judge_abort(o, replace(aborted, state=TxnState.COMPLETE_COMMIT), v2=True).reason
    <Reason.INCONSISTENT: 'inconsistent'>
    """
    e = o.producer_epoch
    if now is None:
        return Stop(Reason.INCONSISTENT, "no coordinator holds its transactional id")
    if now.state in PREPARING:
        return Wait(Reason.COORDINATOR_PREPARING)
    if (now.producer_id, now.epoch, now.state) == (o.producer_id, e, TxnState.ONGOING):
        return Leave()
    shows = f"{now.transactional_id} shows {now.state.value} at epoch {now.epoch}"
    if (
        now.state is not TxnState.COMPLETE_ABORT
        or now.producer_id != o.producer_id
        or now.epoch != e + 1
    ):
        return Stop(
            Reason.INCONSISTENT,
            f"{shows} (producer id {now.producer_id}), not the abort of the open transaction "
            f"(producer id {o.producer_id}, epoch {e})",
        )
    if not 0 <= now.start_time_ms <= o.last_timestamp_ms + CLOCK_SKEW_TOLERANCE_MS:
        return Stop(
            Reason.INCONSISTENT,
            f"{shows}, of a transaction begun at {now.start_time_ms} ms, after the open one's "
            f"last write at {o.last_timestamp_ms} ms",
        )
    return Repair(e + 1, o.coordinator_epoch, commit=False, guarded=v2)
