"""The sink writes the COMMIT markers that a Kafka 4.x coordinator skipped (KAFKA-20734) for
the newest decided batch, before any task of the next batch runs.

Why before the tasks: a task of the next batch may take the same transactional id (it is free
once committed), and its records on the partition would join the committed transaction's open
range; its abort would then drop the committed records, and the marker could no longer be
written at all. Why only the newest decision: this runs before every batch's tasks, so every
older one was settled before the tasks that followed it.

The look is cheap when nothing is owed (two ListOffsets per leader of the batch's partitions);
only a partition whose last stable offset is below its high watermark is looked at closer
(DescribeProducers, then the coordinator and the first batch of the open range), and only the
evidence of :func:`connectors.kafka.sink.owed_markers.judge` lets a marker be written. Anything
else stops the query with :class:`CommitMarkerSkippedError`, after waiting up to the commit
timeout for what may pass (a leader coming back, a coordinator still writing its markers).
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
from connectors.kafka.partition_txns import OpenOnPartition, open_on_partitions, unstable_partitions
from connectors.kafka.sink.errors import CommitMarkerSkippedError
from connectors.kafka.sink.owed_markers import (
    PREPARING,
    Marked,
    Reason,
    Repair,
    Stop,
    Verdict,
    Wait,
    judge,
)
from connectors.kafka.transactions import TransactionAdmin

_log = logging.getLogger(__name__)
Key = tuple[str, int, int]  # a committable's transaction: (transactional id, producer id, epoch)
_FIRST_PAUSE_S, _MAX_PAUSE_S = 0.05, 1.0
# The start of the warning each written marker logs: operators and the chaos harness count it.
REPAIRED = "KAFKA-20734: wrote the COMMIT marker"
_LOOK_TIMEOUT_S = 10.0  # one ListOffsets round, within the whole deadline
_MIN_LOOK_S = 1.0  # a last look past the deadline still gets an answer, not a timeout


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
    cannot be judged before ``deadline``. After a look that failed, the next one goes through
    a new admin (``reconnect``): a client's metadata can miss a broker that was down when it
    was read, and kafka-python then answers UnknownBrokerIdError until it is read again."""
    written: dict[tuple[str, int], list[Committable]] = defaultdict(list)
    for c in committables:
        for tp in c.partitions:
            written[tp].append(c)
    partitions = sorted(written)
    repaired: list[tuple[Key, TopicPartition]] = []
    pause = _FIRST_PAUSE_S
    stale = False
    while written:
        try:
            if stale:
                admin, stale = reconnect(), False
            owed = _owed(admin, written, deadline)
        except _REFUSED as exc:
            raise CommitMarkerSkippedError(
                batch_id, Reason.NOT_AUTHORIZED, _not_authorized(exc), waits=False,
                partitions=partitions,
            ) from exc  # fmt: skip
        except (Errors.KafkaError, DeadlineExceeded) as exc:  # a leader offline, a restart
            detail = f"the partitions do not answer ({exc!r})"
            waiting, stale = _Waiting(None, None, Reason.LEADER_OFFLINE, detail), True
        else:
            if not owed:
                return sorted({tp for _, tp in repaired})
            waiting = None
            for c, o in owed:
                tp = TopicPartition(o.topic, o.partition)
                verdict = _look(admin, c, o, deadline)
                if isinstance(verdict, Marked):
                    written[(o.topic, o.partition)].remove(c)  # settled: not looked at again
                    if not written[(o.topic, o.partition)]:
                        del written[(o.topic, o.partition)]
                    continue
                if isinstance(verdict, Repair) and (c.key, tp) in repaired:
                    verdict = Stop(Reason.INCONSISTENT, "it stayed open after its marker")
                if isinstance(verdict, Repair):
                    verdict = _write(admin, batch_id, c, o, verdict)
                    if verdict is None:
                        repaired.append((c.key, tp))
                        continue
                if isinstance(verdict, Stop):
                    raise _skipped(batch_id, c, o, verdict.reason, verdict.detail, repaired)
                waiting = _Waiting(c, o, verdict.reason, _WAITED[verdict.reason])
                stale = stale or verdict.reason is Reason.LEADER_OFFLINE
            if not written:
                return sorted({tp for _, tp in repaired})
            if waiting is None:
                continue  # look again at once: each repair is confirmed by the partition
        if deadline.expired():
            raise waiting.error(batch_id, partitions, repaired)
        time.sleep(deadline.bound(pause))
        pause = min(pause * 2, _MAX_PAUSE_S)
    return sorted({tp for _, tp in repaired})


def _write(
    admin: TransactionAdmin, batch_id: int, c: Committable, o: OpenOnPartition, repair: Repair
) -> Wait | Stop | None:
    """Write the owed COMMIT marker, once; what stopped it, if anything. Never sent again
    blindly: the next look starts from the partition's state again."""
    tp = TopicPartition(o.topic, o.partition)
    try:
        admin.write_commit_marker(tp, c.producer_id, repair.marker_epoch, repair.coordinator_epoch)
    except Errors.UnsupportedVersionError as exc:
        return Stop(Reason.UNSUPPORTED, f"its leader cannot take the marker safely ({exc})")
    except _REFUSED as exc:
        return Stop(Reason.NOT_AUTHORIZED, _not_authorized(exc))
    except Errors.KafkaError:
        return Wait(Reason.LEADER_OFFLINE)  # refused (a later epoch there: see the next look)
    _log.warning(
        REPAIRED + " of batch %s on %s-%s (transaction %s, producer id %s, epoch %s, open from "
        "offset %s), which its coordinator committed but skipped",
        batch_id, tp.topic, tp.partition, c.transactional_id, c.producer_id, c.epoch,
        o.start_offset,
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
    """What the last look could not settle yet; the committable and open range are None when
    the partitions could not be looked at."""

    committable: Committable | None
    open: OpenOnPartition | None
    reason: Reason
    detail: str

    def error(
        self,
        batch_id: int,
        partitions: list[tuple[str, int]],
        repaired: list[tuple[Key, TopicPartition]],
    ) -> CommitMarkerSkippedError:
        if self.committable is None or self.open is None:
            return CommitMarkerSkippedError(
                batch_id, self.reason, self.detail, waits=True, partitions=partitions
            )
        return _skipped(batch_id, self.committable, self.open, self.reason, self.detail, repaired)


_WAITED = {
    Reason.COORDINATOR_PREPARING: "its coordinator was still writing markers at the deadline",
    Reason.LEADER_OFFLINE: "its leader or coordinator did not answer before the deadline",
}


def _owed(
    admin: TransactionAdmin,
    written: dict[tuple[str, int], list[Committable]],
    deadline: Deadline,
) -> list[tuple[Committable, OpenOnPartition]]:
    """The committables' producers that their partitions' leaders show with a transaction
    open: a skipped marker, one still in flight, or a later transaction of the producer."""
    timeout_ms = int(max(deadline.bound(_LOOK_TIMEOUT_S), _MIN_LOOK_S) * 1000)
    partitions = [TopicPartition(t, p) for t, p in written]
    unstable = unstable_partitions(admin.kafka_admin, partitions, timeout_ms=timeout_ms)
    if not unstable:
        return []
    return [
        (c, o)
        for o in open_on_partitions(admin.kafka_admin, unstable)
        for c in written[(o.topic, o.partition)]
        if c.producer_id == o.producer_id
    ]


def _look(
    admin: TransactionAdmin, c: Committable, o: OpenOnPartition, deadline: Deadline
) -> Verdict:
    """The evidence about one open range, judged; what cannot be read now is a wait."""
    try:
        now = admin.describe([c.transactional_id], deadline=deadline)[c.transactional_id]
        if now is not None and now.state in PREPARING:
            return Wait(Reason.COORDINATOR_PREPARING)  # the usual case: markers in flight
        first = admin.first_batch_at(
            TopicPartition(o.topic, o.partition), o.start_offset, deadline=deadline
        )
        v2 = now is not None and admin.epoch_bumps_on_end_at(now.coordinator_id, deadline=deadline)
    except _REFUSED as exc:
        return Stop(Reason.NOT_AUTHORIZED, _not_authorized(exc))
    except (Errors.KafkaError, DeadlineExceeded):
        return Wait(Reason.LEADER_OFFLINE)
    return judge(c, o, first, now, v2=v2)


def _skipped(
    batch_id: int,
    c: Committable,
    o: OpenOnPartition,
    reason: Reason,
    detail: str,
    repaired: list[tuple[Key, TopicPartition]],
) -> CommitMarkerSkippedError:
    return CommitMarkerSkippedError(
        batch_id,
        reason,
        detail,
        waits=reason in _WAITED,
        transactional_id=c.transactional_id,
        partition=(o.topic, o.partition),
        start_offset=o.start_offset,
        repaired=[(tp.topic, tp.partition) for _, tp in repaired],
    )
