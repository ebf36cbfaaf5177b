"""The exactly-once commit path of a query or a batch write, over the decisions kept at its
checkpoint location: the Kafka committer under :class:`checkpoint.two_phase_commit.TwoPhaseCommit`.

The Spark adapters (:mod:`connectors.spark.sink`, :mod:`connectors.spark.batch_sink`) build it
afresh for each driver call, since Spark may make each call in another process, and turn its
failures into the error a user must see first (:func:`first_unconfirmable`).
"""

from __future__ import annotations

from kafka.structs import TopicPartition

from checkpoint.errors import CheckpointCommitFailed, ConfigError
from checkpoint.store import SnapshotStore, canonical_location
from checkpoint.two_phase_commit import TwoPhaseCommit
from connectors.kafka.sink.committer import KafkaCommitter
from connectors.kafka.sink.errors import (
    AlreadyWrittenError,
    DecidedTransactionError,
    DecidedWrite,
    TransactionLostError,
)
from connectors.kafka.sink.naming import TransactionalIdNaming, owner_of
from connectors.kafka.sink.options import ExactlyOnceOptions, SinkOptions

# A batch write (connectors.spark.batch_sink) is checkpoint 0 of its location, decided with a
# plan that starts with this; a stream must never take it for its own batch 0.
BATCH_WRITE_ID = 0
BATCH_WRITE_PLAN = "spark-batch-write:"


def exactly_once_protocol(
    sink: SinkOptions, exactly_once: ExactlyOnceOptions, naming: TransactionalIdNaming
) -> tuple[TwoPhaseCommit, KafkaCommitter]:
    """The 2PC over the decisions at the checkpoint location, committing with ``naming``'s ids;
    the caller closes the committer."""
    committer = KafkaCommitter(
        sink.producer_config,
        naming,
        sink.commit_timeout_s,
        location=exactly_once.checkpoint_location,
        prefix_derived=exactly_once.prefix_derived,
    )
    store = SnapshotStore(exactly_once.decision_location)
    protocol = TwoPhaseCommit(store, committer, pipeline_id=naming.prefix, sweeps_lingering=True)
    return protocol, committer


def settle_newest_decision(
    protocol: TwoPhaseCommit, committer: KafkaCommitter
) -> list[TopicPartition]:
    """After R1, before any task of the next batch: every partition of the newest decision
    holds its COMMIT marker, the sink writes one a Kafka 4.x coordinator skipped, or the query
    stops (:mod:`connectors.kafka.sink.marker_repair`). Only the newest: each older one was
    settled before the tasks that followed it. Once per decision and process, since Spark may
    build a batch's writer more than once. The partitions repaired."""
    newest = protocol.store.latest()
    if newest is None:
        return []
    key = (protocol.store.location, newest.checkpoint_id, newest.decided_at_ms)
    if key in _SETTLED:
        return []
    confirmation = protocol.store.confirmation(newest.checkpoint_id)
    if confirmation is None:
        return []  # R1 did not confirm it, and raised: nothing of it is known committed
    loss = confirmation.accepted_loss
    unconfirmed = set() if loss is None else {c.key for c in (*loss.lost, *loss.undetermined)}
    repaired = committer.settle_markers(
        newest.checkpoint_id, [c for c in newest.committables if c.key not in unconfirmed]
    )
    _SETTLED.add(key)
    return repaired


# (decision location, checkpoint id, decided at) settled by this process: a location whose
# checkpoint was deleted and made again reuses its ids.
_SETTLED: set[tuple[str, int, int | None]] = set()


def first_unconfirmable(exc: CheckpointCommitFailed, batch_id: int | None) -> Exception:
    """A decided batch's transaction that cannot be confirmed as committed (lost, or
    undetermined) must surface its own message, even when another transaction's failure (a
    timeout) came first; a definite loss before an undetermined one. ``exc`` itself when
    nothing decided is stuck."""
    stuck = [e for e in exc.errors if isinstance(e, DecidedTransactionError)]
    if not stuck:
        return exc
    first = next((e for e in stuck if isinstance(e, TransactionLostError)), stuck[0])
    return first.in_batch(exc.checkpoint_id if batch_id is None else batch_id, exc.failed)


def refuse_batch_write_location(store: SnapshotStore, location: str) -> None:
    """A stream must not start on a batch write's location: it would take the write's
    decision for its own batch 0 and skip that batch's rows."""
    recorded = store.get(BATCH_WRITE_ID)
    if recorded is not None and (recorded.plan or "").startswith(BATCH_WRITE_PLAN):
        raise ConfigError(
            f"option 'checkpointLocation' = {location!r} holds the decision of a batch write "
            "(df.write.format('kafka-eos')), not of this stream: give the stream a "
            "checkpoint location of its own"
        )


def batch_write_naming(exactly_once: ExactlyOnceOptions) -> TransactionalIdNaming:
    """``<prefix>-batch-<owner>-<task>-<slot>``: a namespace apart from the streams of the
    prefix (a backfill that copies a stream's options must not make that stream's sweep fail
    on a prefix conflict), and an owner from the location, stable across reruns of the write,
    so that a rerun fences what a crashed run left open."""
    return TransactionalIdNaming(
        f"{exactly_once.transactional_id_prefix}-batch",
        owner_of(BATCH_WRITE_PLAN + canonical_location(exactly_once.checkpoint_location)),
    )


def already_written(store: SnapshotStore, location: str, state: DecidedWrite) -> Exception:
    """The refusal to write again where a batch write was decided, saying how it stands."""
    decision = store.get(BATCH_WRITE_ID)
    assert decision is not None
    confirmation = store.confirmation(BATCH_WRITE_ID)
    if confirmation is not None and confirmation.accepted_loss is not None:
        state = DecidedWrite.ACCEPTED_LOSS
    return AlreadyWrittenError(location, decision.decided_at_ms, len(decision.committables), state)
