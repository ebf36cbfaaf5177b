"""Errors of the Kafka sink that mean the exactly-once guarantee could not hold.

They say what happened, to which batch and transaction, why it usually happens, and the fix.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from enum import Enum

from checkpoint.errors import KafkaEosError
from checkpoint.store import canonical_location
from connectors.kafka.sink.owed_markers import Reason
from connectors.kafka.sink.owners import Entry, Registration
from connectors.options import OptionError

_TIMEOUT_FIX = (
    "Raise the producer's transaction.timeout.ms (option kafka.transaction.timeout.ms, at most "
    "the broker's transaction.max.timeout.ms) above trigger interval + batch duration + "
    "restart time, and check that no other job uses the same transactionalIdPrefix "
    "(`kafka-eos lint` and `kafka-eos txn list` help)."
)


class SinkOptionError(OptionError):
    """A sink option is missing, malformed or contradicts another one."""

    code = "KAFKA_EOS.SINK.INVALID_OPTION"
    side = "sink"


class PreCommitLostError(KafkaEosError):
    """A pre-committed transaction ended, or is about to, before the batch's decision: nothing
    was decided, so replaying the batch loses nothing."""

    code = "KAFKA_EOS.SINK.PRE_COMMIT_LOST"

    def __init__(
        self, batch_id: int, transactional_id: str, detail: str, *, batch_write: bool = False
    ) -> None:
        self.batch_id = batch_id
        self.transactional_id = transactional_id
        self.detail = detail
        what = f"pre-committed transaction {transactional_id} cannot be decided ({detail})"
        if batch_write:
            # No replay, and every transaction stays open from the write's first task's first
            # row until the driver's commit after its last task.
            super().__init__(
                f"batch write: {what}. No decision was written and nothing of the write is "
                "visible: rerun the job on the same checkpointLocation. A batch write's "
                "transactions stay open from its first task's first row until the driver's "
                "commit after its last task, so the whole write must end within "
                "transaction.timeout.ms, less the commit margin: raise "
                "kafka.transaction.timeout.ms (at most the brokers' transaction.max.timeout.ms), "
                "give the write enough executor cores to run all its tasks at once, or split it "
                "into several writes, each with its own checkpointLocation."
            )
            return
        super().__init__(
            f"batch {batch_id}: {what}. Usually transaction.timeout.ms expired, or nearly, "
            "between the task's pre-commit and the driver's commit. No decision was written and "
            f"nothing of the batch is visible: restart the query and Spark replays batch "
            f"{batch_id}. {_TIMEOUT_FIX}"
        )

    def in_batch_write(self) -> PreCommitLostError:
        return PreCommitLostError(
            self.batch_id, self.transactional_id, self.detail, batch_write=True
        )


class DecidedTransactionError(KafkaEosError):
    """A transaction of a decided batch cannot be confirmed as committed: the batch stays
    unconfirmed, and every restart of the query stops on it again. Never passes silently.
    Raised as one of its two kinds, which call for different ways forward."""

    code = "KAFKA_EOS.SINK.DECIDED_UNCONFIRMED"
    headline = ""  # what is wrong with the transaction
    fate = ""  # what became of its records
    way_forward = ""  # the operator's next steps after `kafka-eos txn resolve`

    def __init__(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        detail: str,
        batch_id: int | None = None,
        failed: tuple[str, ...] = (),
    ) -> None:
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.epoch = epoch
        self.detail = detail
        self.batch_id = batch_id
        self.failed = failed or (transactional_id,)
        batch = "a decided batch" if batch_id is None else f"decided batch {batch_id}"
        others = (
            f" Transactions of the batch not confirmed as committed: {', '.join(self.failed)}."
            if len(self.failed) > 1
            else ""
        )
        super().__init__(
            f"transaction {transactional_id} (producer id {producer_id}, epoch {epoch}) of "
            f"{batch} {self.headline}: {detail}.{others} {self.fate} Every restart of the "
            f"query stops here again. Way forward: stop the query; "
            f"`{_resolve_command(batch_id)}` shows where each transaction of the batch "
            f"stands. {self.way_forward} Do not reset the query's checkpoint: replaying the "
            "batch would duplicate its transactions that did commit."
        )

    def in_batch(self, batch_id: int, failed: tuple[str, ...] = ()) -> DecidedTransactionError:
        """The same error, naming the batch and every transaction of it that did not commit
        (the committer itself knows neither)."""
        return type(self)(
            self.transactional_id, self.producer_id, self.epoch, self.detail, batch_id, failed
        )


class TransactionLostError(DecidedTransactionError):
    """A decided batch has a transaction that the broker aborted before its commit: its
    records are lost to read_committed readers. Raised only on evidence of that abort."""

    code = "KAFKA_EOS.SINK.TRANSACTION_LOST"
    headline = "was aborted before its commit"
    fate = (
        "Its records will never be visible to read_committed readers, while the rest of the "
        "batch is."
    )
    way_forward = (
        'The same command with `--accept-loss --reason "..."` records the loss of exactly the '
        "lost ones in the batch's confirmation; then restart the query. To recover the lost "
        "records, re-process their input outside this query, judged from what the output "
        "holds (`kafka-eos verify`). The usual cause is an outage longer than the transaction "
        f"timeout: {_TIMEOUT_FIX}"
    )


class CommitUndeterminedError(DecidedTransactionError):
    """The coordinator no longer shows what became of a decided transaction: the id moved on
    (a later transaction, a fence, a new producer id) or was forgotten. It may well have
    committed; taking it for lost and re-processing its input would duplicate it."""

    code = "KAFKA_EOS.SINK.COMMIT_UNDETERMINED"
    headline = "cannot be shown to have committed or aborted"
    fate = (
        "Its records may be visible: the coordinator no longer shows that transaction (a late "
        "attempt of its task may have taken the id after the commit, or the id expired)."
    )
    way_forward = (
        "Check the output for the batch's results (`kafka-eos verify --input <topic> "
        '--output <topic>`). Then the same command with `--accept-loss --reason "..."` '
        "confirms the batch with these transactions on record as undetermined, and the query "
        "goes on. Re-process only input whose results `kafka-eos verify` shows missing, never "
        "the whole batch."
    )


def _resolve_command(batch_id: int | None) -> str:
    return (
        "kafka-eos txn resolve --checkpoint-location <checkpointLocation> "
        f"--bootstrap-servers <brokers>{'' if batch_id is None else f' --batch {batch_id}'}"
    )


class CommitMarkerSkippedError(KafkaEosError):
    """A committed batch's COMMIT marker is missing on a partition, and the sink could not
    write it safely (:mod:`connectors.kafka.sink.marker_repair`). Raised when the writer of the
    next batch is built, before any of its tasks: a task that wrote to the partition would join
    the open range, and its abort would drop the committed records."""

    code = "KAFKA_EOS.SINK.COMMIT_MARKER_SKIPPED"

    def __init__(
        self,
        batch_id: int,
        reason: Reason,
        detail: str,
        *,
        waits: bool,
        transactional_id: str | None = None,
        partition: tuple[str, int] | None = None,
        start_offset: int = -1,
        partitions: Sequence[tuple[str, int]] = (),
        repaired: Sequence[tuple[str, int]] = (),
    ) -> None:
        """``waits``: a later look may still write the marker (a leader back online, a
        coordinator done writing); otherwise no automatic marker is safe. Without
        ``partition`` the batch's ``partitions`` could not be looked at, and whether a marker
        is missing is not known. ``repaired``: partitions whose marker the sink did write."""
        self.batch_id = batch_id
        self.reason = reason
        self.detail = detail
        self.waits = waits
        self.transactional_id = transactional_id
        self.partition = partition
        self.start_offset = start_offset
        self.repaired = list(repaired)
        done = f" The sink did write the markers of {_names(repaired)}." if repaired else ""
        if partition is None:
            super().__init__(
                f"batch {batch_id} was committed, but whether its COMMIT markers reached its "
                f"partitions ({_names(partitions)}) cannot be told: {detail} [{reason.value}]. "
                f"{_KAFKA_20734} Nothing was lost, and no task of the next batch ran. "
                + (
                    "Restart the query once they answer: its next batch looks again, and "
                    "writes a marker that is missing."
                    if waits
                    else "Grant what the detail names, then restart the query."
                )
            )
            return
        topic, index = partition
        where = f"{topic}-{index}"
        if waits:
            way = (
                f"Nothing was lost. Restart the query once {where} answers (its leader online, "
                "its transaction coordinator done writing markers): its next batch looks again "
                "and writes the marker"
            )
        else:
            way = (
                f"No marker was written to {where}. Read {where} from offset {start_offset} "
                f"(read_uncommitted) against batch {batch_id}'s input. `kafka-eos txn "
                f"find-hanging --bootstrap-servers <brokers> --topic {topic} --older-than 0s` "
                "shows the open range and its coordinator's view once no coordinator tracks it, "
                "and `--commit --prefix <transactionalIdPrefix>` or `--abort` ends it where "
                "their evidence holds (docs/sink.md, runbook). Do not reset the checkpoint"
            )
        super().__init__(
            f"batch {batch_id} was committed, but the COMMIT marker of its transaction "
            f"{transactional_id} is missing on {where} (open from offset {start_offset}): "
            f"{detail} [{reason.value}]. {_KAFKA_20734} read_committed readers of {where} stop at "
            f"offset {start_offset} until it is written.{done} {way}."
        )


class AbortMarkerSkippedError(KafkaEosError):
    """A transaction the driver fenced is still open on a partition of the output: its
    coordinator skipped the ABORT marker (KAFKA-20734), and the sink could not write it safely
    (:func:`connectors.kafka.sink.marker_repair.settle_fenced`). Raised before the id is used
    again by this driver: a later transaction of the id that wrote to the partition would join
    the aborted range, and its commit would make the aborted records visible, duplicates of
    their replay."""

    code = "KAFKA_EOS.SINK.ABORT_MARKER_SKIPPED"

    def __init__(
        self,
        reason: Reason,
        detail: str,
        *,
        waits: bool,
        transactional_id: str | None,
        partitions: Sequence[tuple[str, int]],
        start_offset: int | None,
    ) -> None:
        """``waits``: the leader or the coordinator did not answer in time, and a later look
        may still write the marker; otherwise no automatic marker is safe."""
        self.reason = reason
        self.detail = detail
        self.waits = waits
        self.transactional_id = transactional_id
        self.partitions = list(partitions)
        self.start_offset = start_offset
        where = _names(self.partitions)
        topics = " ".join(f"--topic {t}" for t in sorted({t for t, _ in self.partitions}))
        what = "a transaction" if transactional_id is None else f"transaction {transactional_id}"
        opened = "" if start_offset is None else f" (from offset {start_offset})"
        state = "may still be open" if waits else "is still open"
        super().__init__(
            f"the driver fenced {what}, which {state} on {where}{opened}: no ABORT marker "
            f"could be written there: {detail} [{reason.value}]. A Kafka 4.x transaction "
            "coordinator skips the markers of a partition whose leader is offline as it ends a "
            "transaction (KAFKA-20734); read_committed readers of the partition stop at the "
            "open range until it gets one, and a later transaction of the same id that wrote "
            "there would commit the aborted records with its own. Once the partition has a "
            "leader, end the range before restarting the query: `kafka-eos txn find-hanging "
            f"--bootstrap-servers <brokers> {topics} --older-than 0s` shows it and its "
            "coordinator's view; where that shows CompleteAbort at the range's epoch + 1, "
            "`--abort --force` writes the marker "
            "(docs/sink.md, runbook). Do not reset the checkpoint."
        )


def _names(partitions: Sequence[tuple[str, int]]) -> str:
    return ", ".join(f"{t}-{p}" for t, p in partitions)


_KAFKA_20734 = (
    "A Kafka 4.x transaction coordinator skips the marker of a partition whose leader is "
    "offline as it commits (KAFKA-20734); a 3.x one waits for the leader."
)


class PrefixConflictError(KafkaEosError):
    """Another query writes with the same ``transactionalIdPrefix``: the prefix must be unique
    per query. The two never fence each other (their ids differ by owner), but a redeploy that
    left the old query running would write the output twice."""

    code = "KAFKA_EOS.SINK.PREFIX_CONFLICT"

    def __init__(
        self,
        prefix: str,
        location: str,
        owner: str,
        foreign: dict[str, tuple[Entry, list[str]]],
        now_ms: int,
        *,
        prefix_derived: bool = False,
    ) -> None:
        """``foreign``: per other owner, where its query checkpoints (as the owner registry
        knows it, :mod:`connectors.kafka.sink.owners`) and its open transactional ids.
        ``prefix_derived``: no ``transactionalIdPrefix`` was set, the prefix comes from the
        checkpoint location, so the other query checkpointed at the same location."""
        self.prefix = prefix
        self.owner = owner
        self.foreign = foreign
        label = "Other query" if len(foreign) == 1 else "Other queries"
        others = "; ".join(
            f"owner {o} ({entry.describe(now_ms)}): {', '.join(sorted(ids))}"
            for o, (entry, ids) in sorted(foreign.items())
        )
        super().__init__(
            f"transactionalIdPrefix {prefix!r} is in use by another query. {label}: {others}. "
            f"This query: checkpoint {location!r}, owner {owner}. Nothing was decided and the "
            f"other query's transactions were left alone. {_usual_cause(prefix_derived)} "
            "Stop it, or give this query its own transactionalIdPrefix. If the other query is "
            f"gone for good, {_abort_advice(prefix, foreign, location)}; this query then "
            "starts. An "
            "owner is the part of an id after the prefix: the start of the sha256 of the "
            "query id in Spark's <checkpointLocation>/metadata."
        )


def _usual_cause(prefix_derived: bool) -> str:
    if not prefix_derived:
        return (
            "Usually an old deployment of the same job still runs, or crashed moments ago, "
            "on another checkpoint location."
        )
    return (
        "No transactionalIdPrefix was set, so the prefix was derived from the checkpoint "
        "location, and the other query used the same location: its checkpoint was deleted or "
        "replaced while its transactions were open (a reset query), or the same path names "
        "another place on another machine."
    )


def _abort_advice(
    prefix: str, foreign: dict[str, tuple[Entry, list[str]]], this_location: str
) -> str:
    """End exactly the other query's listed transactions, never this query's, and never one
    that query decided: the abort reads that query's decisions, so it needs its location,
    unless that is this query's own (a reset): its decisions went with its checkpoint."""
    located = [
        (entry.location, ids) for entry, ids in foreign.values() if isinstance(entry, Registration)
    ]
    if len(located) == len(foreign) == 1:
        location, ids = located[0]
        flags = " ".join(f"--transactional-id {tid}" for tid in sorted(ids))
        if canonical_location(location) == canonical_location(this_location):
            return (
                "wait for their transaction.timeout.ms, or end them with `kafka-eos txn abort "
                f"--bootstrap-servers <brokers> {flags} --yes`. Its checkpoint at this location "
                "was replaced, and its decisions with it: a batch it decided and had not "
                "finished committing can no longer be committed, and is lost either way"
            )
        return (
            f"`kafka-eos txn abort --bootstrap-servers <brokers> {flags} --checkpoint-location "
            f"{location!r}` ends those transactions except the ones it decided (or wait for "
            "their transaction.timeout.ms)"
        )
    return (
        "wait for its transactions' transaction.timeout.ms, or end them with `kafka-eos txn "
        "abort --transactional-id <id> --checkpoint-location <its checkpoint>`: without its "
        "checkpoint location the abort cannot tell a batch that query decided, and would drop it"
    )


class DecidedWrite(Enum):
    """What became of the batch write a location already holds, as its rerun found it."""

    COMMITTED = "it was committed, and its rows are in Kafka once"
    FINISHED_NOW = (
        "the run that decided it had not finished its commits, which were finished now, and "
        "its rows are in Kafka once"
    )
    DECIDED_BY_ANOTHER_RUN = (
        "another run of this write decided it while this run was writing: its rows are in "
        "Kafka once, and this run's transactions were aborted. Never rerun this write on "
        "another location, which would write its rows twice"
    )
    ACCEPTED_LOSS = (
        "it was confirmed with transactions accepted as lost or undetermined (kafka-eos txn "
        "resolve --accept-loss): some of its rows may be missing, and `kafka-eos verify` tells "
        "which"
    )


class AlreadyWrittenError(KafkaEosError):
    """A batch write's location holds a decided write: writing again would duplicate it."""

    code = "KAFKA_EOS.SINK.ALREADY_WRITTEN"

    def __init__(
        self, location: str, decided_at_ms: int | None, transactions: int, state: DecidedWrite
    ) -> None:
        self.state = state
        when = (
            "at an unknown time"
            if decided_at_ms is None
            else time.strftime("at %Y-%m-%d %H:%M:%S UTC", time.gmtime(decided_at_ms / 1000))
        )
        super().__init__(
            f"option 'checkpointLocation' = {location!r} holds the decision of a batch write, "
            f"taken {when} over {transactions} transactions; {state.value}. This write did not "
            "write its rows again. If this job reruns that write, its output is as that "
            "write left it. To write new rows, give this write a checkpointLocation of its own "
            "(one per write)."
        )
