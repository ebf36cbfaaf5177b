"""The sink writes the markers that a Kafka 4.x coordinator skipped (KAFKA-20734): the COMMIT
markers of the newest decided batch, before any task of the next batch runs (:func:`settle`),
and the ABORT markers of the transactions the driver fences, right after the fence
(:func:`settle_fenced`).

Why before the tasks: a task of the next batch may take the same transactional id (it is free
once committed), and its records on the partition would join the committed transaction's open
range; its abort would then drop the committed records, and the marker could no longer be
written at all. Why only the newest decision: this runs before every batch's tasks, so every
older one was settled before the tasks that followed it. Why right after a fence: the fenced
id is free once its abort completes, and a later transaction of it that writes to the partition
joins the aborted range, whose commit would make the aborted records visible.

The look is cheap when nothing is owed (two ListOffsets per leader of the partitions); only a
partition whose last stable offset is below its high watermark is looked at closer
(DescribeProducers, then the coordinator and, for a COMMIT, the first batch of the open range),
and only the evidence of :func:`connectors.kafka.sink.owed_markers.judge` (``judge_abort``) lets
a marker be written. Anything else stops with :class:`CommitMarkerSkippedError`
(:class:`AbortMarkerSkippedError`), after waiting up to the commit timeout for what may pass (a
leader coming back, a coordinator still writing its markers).
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import kafka.errors as Errors
from kafka.structs import TopicPartition

from checkpoint.deadline import Deadline
from checkpoint.errors import DeadlineExceeded
from checkpoint.model import Committable
from connectors.kafka.partition_txns import (
    OpenOnPartition,
    open_on_partitions,
    unstable_partitions,
)
from connectors.kafka.sink.errors import AbortMarkerSkippedError, CommitMarkerSkippedError
from connectors.kafka.sink.owed_markers import (
    PREPARING,
    Leave,
    Marked,
    Reason,
    Repair,
    Stop,
    Verdict,
    Wait,
    judge,
    judge_abort,
)
from connectors.kafka.transactions import TransactionAdmin

_log = logging.getLogger(__name__)
Key = tuple[str, int, int]  # a committable's transaction: (transactional id, producer id, epoch)
_FIRST_PAUSE_S, _MAX_PAUSE_S = 0.05, 1.0
# The start of the warning each written marker logs: operators and the chaos harness count it.
REPAIRED = "KAFKA-20734: wrote the"
_LOOK_TIMEOUT_S = 10.0  # one ListOffsets round, within the whole deadline
_MIN_LOOK_S = 1.0  # a last look past the deadline still gets an answer, not a timeout


@dataclass(frozen=True)
class Fenced:
    """A transaction the driver fenced, with the partitions its coordinator listed just before
    the fence: where its ABORT markers go."""

    transactional_id: str
    producer_id: int
    epoch: int
    partitions: tuple[tuple[str, int], ...]


Expected = Committable | Fenced  # whose marker a partition should hold: COMMIT, or ABORT


def settle(
    admin: TransactionAdmin,
    batch_id: int,
    committables: Sequence[Committable],
    *,
    deadline: Deadline,
    reconnect: Callable[[], TransactionAdmin],
) -> list[TopicPartition]:
    """Make sure every partition of ``committables`` (a confirmed decision's) holds its COMMIT
    marker, writing the ones owed; the partitions where it wrote one. Raises
    :class:`CommitMarkerSkippedError` when one is owed and cannot be written safely, or
    cannot be judged before ``deadline``."""
    return _settle(admin, _Decided(batch_id), committables, deadline=deadline, reconnect=reconnect)


def settle_fenced(
    admin: TransactionAdmin,
    fenced: Sequence[Fenced],
    *,
    deadline: Deadline,
    reconnect: Callable[[], TransactionAdmin],
) -> list[TopicPartition]:
    """Right after the driver fenced ``fenced``: make sure each one's partitions hold its ABORT
    marker, writing the ones a Kafka 4.x coordinator skipped; the partitions where it wrote
    one. Before anything else can happen to the id: once the abort completes, the id is free,
    a later transaction of it that writes to the partition joins the aborted range, and its
    commit makes the aborted records visible, duplicates of their replay. Raises
    :class:`AbortMarkerSkippedError` as :func:`settle` raises its error."""
    return _settle(admin, _FENCES, fenced, deadline=deadline, reconnect=reconnect)


def _settle(
    admin: TransactionAdmin,
    whose: _Decided | _Fences,
    expected: Sequence[Expected],
    *,
    deadline: Deadline,
    reconnect: Callable[[], TransactionAdmin],
) -> list[TopicPartition]:
    """The loop of :func:`settle` and :func:`settle_fenced` (``whose`` markers: it names the
    error raised): look, judge, write what is owed, look again until a look finds nothing owed.
    After a look that failed, the next one goes through a new admin (``reconnect``): a client's
    metadata can miss a broker that was down when it was read, and kafka-python then answers
    UnknownBrokerIdError until it is read again."""
    pending: dict[tuple[str, int], list[Expected]] = defaultdict(list)
    for x in expected:
        for tp in x.partitions:
            pending[tp].append(x)
    partitions = sorted(pending)
    repaired: list[tuple[Key, TopicPartition]] = []
    pause = _FIRST_PAUSE_S
    stale = False
    while pending:
        try:
            if stale:
                admin, stale = reconnect(), False
            owed = _owed(admin, pending, deadline)
        except _REFUSED as exc:
            raise whose.error(
                _Waiting(None, None, Reason.NOT_AUTHORIZED, _not_authorized(exc)),
                partitions, repaired, waits=False,
            ) from exc  # fmt: skip
        except (Errors.KafkaError, DeadlineExceeded) as exc:  # a leader offline, a restart
            detail = f"the partitions do not answer ({exc!r})"
            waiting, stale = _Waiting(None, None, Reason.LEADER_OFFLINE, detail), True
        else:
            waiting, acted = None, False
            for x, o in owed:
                tp = TopicPartition(o.topic, o.partition)
                key = (x.transactional_id, x.producer_id, x.epoch)
                verdict = _look(admin, x, o, deadline)
                if isinstance(verdict, (Marked, Leave)):
                    pending[(o.topic, o.partition)].remove(x)  # settled: not looked at again
                    if not pending[(o.topic, o.partition)]:
                        del pending[(o.topic, o.partition)]
                    continue
                if isinstance(verdict, Repair) and (key, tp) in repaired:
                    verdict = Stop(Reason.INCONSISTENT, "it stayed open after its marker")
                if isinstance(verdict, Repair):
                    verdict = _write(admin, whose, x.transactional_id, o, verdict)
                    if verdict is None:
                        repaired.append((key, tp))
                        acted = True
                        continue
                if isinstance(verdict, Stop):
                    raise whose.error(
                        _Waiting(x, o, verdict.reason, verdict.detail),
                        partitions, repaired, waits=verdict.reason in _WAITED,
                    )  # fmt: skip
                waiting = _Waiting(x, o, verdict.reason, _WAITED[verdict.reason])
                stale = stale or verdict.reason is Reason.LEADER_OFFLINE
            if waiting is None and not acted:
                break  # nothing owed
            if waiting is None:
                continue  # look again at once: each repair is confirmed by the partition
        if deadline.expired():
            raise whose.error(waiting, partitions, repaired, waits=True)
        time.sleep(deadline.bound(pause))
        pause = min(pause * 2, _MAX_PAUSE_S)
    return sorted({tp for _, tp in repaired})


def _write(
    admin: TransactionAdmin, whose: _Decided | _Fences, tid: str, o: OpenOnPartition, repair: Repair
) -> Wait | Stop | None:
    """Write the owed marker, once; what stopped it, if anything. Never sent again blindly:
    the next look starts from the partition's state again."""
    tp = TopicPartition(o.topic, o.partition)
    try:
        if repair.commit:
            admin.write_commit_marker(
                tp, o.producer_id, repair.marker_epoch, repair.coordinator_epoch
            )
        else:
            admin.write_abort_marker(
                tp, o.producer_id, repair.marker_epoch, repair.coordinator_epoch,
                guarded=repair.guarded,
            )  # fmt: skip
    except Errors.UnsupportedVersionError as exc:
        return Stop(Reason.UNSUPPORTED, f"its leader cannot take the marker safely ({exc})")
    except _REFUSED as exc:
        return Stop(Reason.NOT_AUTHORIZED, _not_authorized(exc))
    except (Errors.KafkaError, DeadlineExceeded):
        # Refused (a later epoch there: see the next look), or the leader unreachable through
        # this admin (one that restarted after the admin read the cluster stays unknown to it):
        # the next look goes through a new one.
        return Wait(Reason.LEADER_OFFLINE)
    _log.warning(
        "%s %s marker on %s-%s (transaction %s, producer id %s, epoch %s, open from offset %s; "
        "%s), which its coordinator skipped",
        REPAIRED, "COMMIT" if repair.commit else "ABORT", tp.topic, tp.partition, tid,
        o.producer_id, o.producer_epoch, o.start_offset,
        whose,
    )  # fmt: skip
    return None


# What the sink's principal may not be allowed: the look (ListOffsets: DESCRIBE on the topic;
# DescribeProducers and Fetch: READ) and the marker (WriteTxnMarkers: CLUSTER_ACTION).
_REFUSED = (
    Errors.TopicAuthorizationFailedError,
    Errors.ClusterAuthorizationFailedError,
    Errors.TransactionalIdAuthorizationFailedError,
)


def _not_authorized(exc: Exception) -> str:
    return (
        f"the sink's principal may not look at the partitions or write the marker ({exc!r}): "
        "it needs READ and DESCRIBE on the output topics (`kafka-acls --add --allow-principal "
        "User:<sink> --operation Read --operation Describe --topic <topic>`), and CLUSTER_ACTION "
        "on the cluster to write a skipped marker (`--operation ClusterAction --cluster`)"
    )


@dataclass(frozen=True)
class _Waiting:
    """What a look could not settle: one expected range (``expected`` and ``open``), or
    neither when the partitions could not be looked at."""

    expected: Expected | None
    open: OpenOnPartition | None
    reason: Reason
    detail: str


@dataclass(frozen=True)
class _Decided:
    """Whose markers :func:`settle` writes: the COMMIT markers of decided batch ``batch_id``."""

    batch_id: int

    def __str__(self) -> str:
        return f"decided in batch {self.batch_id}"

    def error(
        self,
        w: _Waiting,
        partitions: list[tuple[str, int]],
        repaired: list[tuple[Key, TopicPartition]],
        *,
        waits: bool,
    ) -> CommitMarkerSkippedError:
        x, o = w.expected, w.open
        if not isinstance(x, Committable) or o is None:
            return CommitMarkerSkippedError(
                self.batch_id, w.reason, w.detail, waits=waits, partitions=partitions
            )
        return CommitMarkerSkippedError(
            self.batch_id,
            w.reason,
            w.detail,
            waits=waits,
            transactional_id=x.transactional_id,
            partition=(o.topic, o.partition),
            start_offset=o.start_offset,
            repaired=[(tp.topic, tp.partition) for _, tp in repaired],
        )


@dataclass(frozen=True)
class _Fences:
    """Whose markers :func:`settle_fenced` writes: the ABORT markers of the driver's fences."""

    def __str__(self) -> str:
        return "fenced by the driver"

    def error(
        self,
        w: _Waiting,
        partitions: list[tuple[str, int]],
        repaired: list[tuple[Key, TopicPartition]],
        *,
        waits: bool,
    ) -> AbortMarkerSkippedError:
        x, o = w.expected, w.open
        return AbortMarkerSkippedError(
            w.reason,
            w.detail,
            waits=waits,
            transactional_id=None if x is None else x.transactional_id,
            partitions=partitions if o is None else [(o.topic, o.partition)],
            start_offset=None if o is None else o.start_offset,
        )


_FENCES = _Fences()


_WAITED = {
    Reason.COORDINATOR_PREPARING: "its coordinator was still writing markers at the deadline",
    Reason.LEADER_OFFLINE: "its leader or coordinator did not answer before the deadline",
}


def _owed(
    admin: TransactionAdmin, pending: dict[tuple[str, int], list[Expected]], deadline: Deadline
) -> list[tuple[Expected, OpenOnPartition]]:
    """The expected producers that the partitions' leaders show open there: a skipped marker,
    one still in flight, or a later transaction of the producer."""
    timeout_ms = int(max(deadline.bound(_LOOK_TIMEOUT_S), _MIN_LOOK_S) * 1000)
    partitions = [TopicPartition(t, p) for t, p in pending]
    unstable = unstable_partitions(admin.kafka_admin, partitions, timeout_ms=timeout_ms)
    if not unstable:
        return []
    return [
        (x, o)
        for o in open_on_partitions(admin.kafka_admin, unstable)
        for x in pending[(o.topic, o.partition)]
        if x.producer_id == o.producer_id
    ]


def _look(admin: TransactionAdmin, x: Expected, o: OpenOnPartition, deadline: Deadline) -> Verdict:
    """The evidence about one open range, judged; what cannot be read now is a wait."""
    tid = x.transactional_id
    try:
        now = admin.describe([tid], deadline=deadline)[tid]
        if now is not None and now.state in PREPARING:
            return Wait(Reason.COORDINATOR_PREPARING)  # the usual case: markers in flight
        v2 = now is not None and admin.epoch_bumps_on_end_at(now.coordinator_id, deadline=deadline)
        if isinstance(x, Fenced):
            return judge_abort(o, now, v2=v2)
        first = admin.first_batch_at(
            TopicPartition(o.topic, o.partition), o.start_offset, deadline=deadline
        )
    except _REFUSED as exc:
        return Stop(Reason.NOT_AUTHORIZED, _not_authorized(exc))
    except (Errors.KafkaError, DeadlineExceeded):
        return Wait(Reason.LEADER_OFFLINE)
    return judge(x, o, first, now, v2=v2)
