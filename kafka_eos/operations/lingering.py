"""Lingering transactions: find them, and abort (fence) the ones whose abort loses nothing.

A lingering transaction is one left Ongoing by a producer that is gone: a task that died after
its pre-commit, or a pipeline retired for good. Until it ends or times out it holds back the
last stable offset (LSO) of its partitions, so every ``read_committed`` reader stalls there.

Aborting one is safe except in one case: the sink already *decided* to commit it. Its
committable is then in a decision of the sink's snapshot store that is not confirmed yet, and
the query's next recovery commits it; aborting it would drop a decided batch's records for
good. :func:`plan_abort` refuses those, and :func:`abort_lingering` ends the rest through
:class:`~connectors.kafka.sink.committer.KafkaCommitter`, which fences each one's producer as
the sink does (:mod:`connectors.kafka.fence`): a producer still alive cannot write on.

Used by ``kafka-eos txn`` and by ``kafka-eos verify --prefix``. Reports are built as the
JSON-ready dicts below first, and printed as text or JSON second.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from typing import TypedDict

import kafka.errors as Errors

from checkpoint.errors import DeadlineExceeded, KafkaEosError
from checkpoint.model import CheckpointId, Committable
from checkpoint.store import SnapshotStore
from connectors.kafka.sink.committer import KafkaCommitter
from connectors.kafka.sink.errors import AbortMarkerSkippedError
from connectors.kafka.sink.naming import OwnedId
from connectors.kafka.sink.options import decision_location
from connectors.kafka.sink.owners import Entry, Registration, Unknown
from connectors.kafka.txn_state import Standing, TxnDescription, TxnState, standing_of

DecisionKey = tuple[str, int, int]
"""(transactional id, producer id, epoch): :attr:`checkpoint.model.Committable.key`."""


class LingeringTransactionError(KafkaEosError):
    """The cluster or the decisions could not be read; the message names what and the fix."""

    code = "KAFKA_EOS.OPERATIONS.TXN_READ_FAILED"


class Verdict(StrEnum):
    """Whether one transactional id's current transaction may be aborted."""

    ABORT = "abort"  # Ongoing and named by no unconfirmed decision
    DECIDED = "decided"  # Ongoing and named by an unconfirmed decision: refused
    NOT_OPEN = "not-open"  # no Ongoing transaction: nothing to abort


class Result(StrEnum):
    """What happened to one transactional id (stable codes, shown in JSON)."""

    ABORTED = "aborted"
    ABORT_FAILED = "abort-failed"
    WOULD_ABORT = "would-abort"  # --dry-run
    REFUSED = "refused-decided"
    NOT_OPEN = "not-open"


@dataclass(frozen=True)
class Candidate:
    """One transactional id and the verdict on its current transaction."""

    transactional_id: str
    verdict: Verdict
    description: TxnDescription | None  # None: the id is unknown to its coordinator
    decided_in: CheckpointId | None = None  # the unconfirmed decision naming it (DECIDED)

    def committable(self) -> Committable:
        """The transaction as the committer names it; only an ABORT candidate has one."""
        assert self.verdict == Verdict.ABORT and self.description is not None
        now = self.description
        return Committable(
            now.transactional_id, now.producer_id, now.epoch, 0, now.partitions, now.start_time_ms
        )


@dataclass(frozen=True)
class AbortOutcome:
    """What the fence did to one candidate; ``now`` is the state described afterwards."""

    candidate: Candidate
    error: str | None
    now: TxnDescription | None

    @property
    def failure(self) -> str | None:
        """Why the candidate's transaction may still be open, or None if it ended."""
        before = self.candidate.description
        if self.error is not None or before is None:
            return self.error
        p, e, start = before.producer_id, before.epoch, before.start_time_ms
        if standing_of(self.now, p, e, start_time_ms=start) is Standing.HELD:
            return "still Ongoing at its epoch after the fence"
        return None


class PartitionDict(TypedDict):
    topic: str
    partition: int


class TxnDict(TypedDict):
    """JSON form of one transaction, as ``txn list --json`` prints it."""

    transactional_id: str
    state: str
    producer_id: int
    epoch: int
    start_time_ms: int | None  # None when no transaction is open
    age_s: float | None
    timeout_ms: int
    partitions: list[PartitionDict]


class QueryDict(TypedDict):
    """The query that named a transactional id, as its sink registered it
    (:mod:`connectors.kafka.sink.owners`)."""

    prefix: str
    owner: str
    checkpoint_location: str | None  # None: unknown, for the reason below
    registered_ms: int | None
    unknown_reason: str | None


class ListedTxnDict(TxnDict):
    query: QueryDict | None  # None: not an id a kafka-eos sink of this release names


class TxnListDict(TypedDict):
    """JSON form of ``txn list --json``; version 1 (``query`` was added within it)."""

    version: int
    transactions: list[ListedTxnDict]


class AbortEntryDict(TypedDict):
    transactional_id: str
    result: str  # a Result code
    decided_in: int | None  # the unconfirmed decision naming it (refused-decided)
    error: str | None
    before: TxnDict | None  # None: the id is unknown to its coordinator
    after: TxnDict | None  # described after the abort; None when nothing was sent


class AbortReportDict(TypedDict):
    """JSON form of ``txn abort --json``; version 1."""

    version: int
    dry_run: bool
    decisions_checked: bool  # False: decided transactions could not be told apart
    transactions: list[AbortEntryDict]
    summary: dict[str, int]  # count per Result code


@contextmanager
def reaching(bootstrap_servers: str, action: str) -> Iterator[None]:
    """Turn the Kafka client's errors inside the block into one message with the fix."""
    try:
        yield
    except (Errors.KafkaError, DeadlineExceeded) as exc:
        raise LingeringTransactionError(
            f"{action} on --bootstrap-servers {bootstrap_servers!r} failed: {exc}. Check that "
            "the brokers are reachable from here and that -X gives the cluster's security "
            "settings (security.protocol, sasl.*, ssl.*); raise --timeout for a slow cluster."
        ) from exc


def decision_store(checkpoint_location: str, if_none_decided: str) -> SnapshotStore:
    """The decisions of the sink whose query checkpoints at ``checkpoint_location``.

    A location without any decision is refused: a mistyped path would otherwise look like a
    sink that decided nothing. ``if_none_decided`` says what to do if the query truly did not.
    """
    location = decision_location(checkpoint_location)
    store = SnapshotStore(location)
    if not store.checkpoint_ids():
        raise LingeringTransactionError(
            f"--checkpoint-location {checkpoint_location!r}: no kafka-eos sink decisions in "
            f"{location}. Pass the checkpointLocation option of the query that owns these "
            f"transactions; {if_none_decided}"
        )
    return store


def decided_transactions(checkpoint_location: str) -> dict[DecisionKey, CheckpointId]:
    """Every committable of an unconfirmed decision of the sink whose query checkpoints at
    ``checkpoint_location``, by key, with the decision's checkpoint id."""
    store = decision_store(
        checkpoint_location,
        "if that query never completed a batch it decided nothing, so run without "
        "--checkpoint-location and confirm with --yes.",
    )
    decided: dict[DecisionKey, CheckpointId] = {}
    for checkpoint_id in store.unconfirmed_ids():
        snapshot = store.get(checkpoint_id)
        for committable in () if snapshot is None else snapshot.committables:
            decided[committable.key] = checkpoint_id
    return decided


def plan_abort(
    described: Mapping[str, TxnDescription | None],
    decided: Mapping[DecisionKey, CheckpointId] | None,
) -> list[Candidate]:
    """The verdict per transactional id, in id order.

    ``decided`` is None when the decisions are unknown (no checkpoint location): then every
    Ongoing transaction is ABORT, and the caller must have the user accept that risk.
    """
    plan = []
    for tid in sorted(described):
        now = described[tid]
        if now is None or now.state != TxnState.ONGOING:
            plan.append(Candidate(tid, Verdict.NOT_OPEN, now))
            continue
        decision = (decided or {}).get((tid, now.producer_id, now.epoch))
        if decision is not None:
            # Aborting here would drop a decided batch: the query's recovery commits it.
            plan.append(Candidate(tid, Verdict.DECIDED, now, decision))
        else:
            plan.append(Candidate(tid, Verdict.ABORT, now))
    return plan


# A running query registers its checkpoint location when it builds its writer and after its
# commits, at most hourly per driver-side process (connectors.kafka.sink.owners): one that
# registered within this long may still be running.
LIVE_WITHIN_MS = 3_600_000


def live_queries(queries: Mapping[OwnedId, Entry], *, now_ms: int) -> list[str]:
    """A warning for each query that registered its location within the last hour, or whose
    registration cannot be read: aborting its transactions while it runs fails its batch at
    best, and a transaction it decides between this command's check of its decisions and the
    abort is lost."""
    warnings = []
    for owned, entry in sorted(queries.items(), key=lambda q: (q[0].prefix, q[0].owner)):
        query = f"the query of prefix {owned.prefix!r}, owner {owned.owner}"
        if isinstance(entry, Unknown):
            why = f"cannot tell whether it runs ({entry.reason})"
        elif now_ms - entry.registered_ms < LIVE_WITHIN_MS:
            why = f"({entry.describe(now_ms)}) may be running: its sink registered within the hour"
        else:
            continue
        warnings.append(
            f"{query} {why}. Aborting a running query's transactions fails its batch, and one "
            "it decides meanwhile is lost. Stop the query first"
        )
    return warnings


def abort_lingering(
    committer: KafkaCommitter, candidates: Iterable[Candidate]
) -> list[AbortOutcome]:
    """Fence every ABORT candidate, then describe it again to show the result.

    One failure does not stop the others: each abort is independent, and a partial result
    that names the failure is more useful than none.
    """
    outcomes = []
    for candidate in candidates:
        if candidate.verdict != Verdict.ABORT:
            continue
        error = None
        try:
            committer.abort(candidate.committable())
        except (Errors.KafkaError, DeadlineExceeded, AbortMarkerSkippedError) as exc:
            # kafka-python's errors name their class; ours say what timed out, or which
            # partition kept the aborted range open (KAFKA-20734)
            error = str(exc)
        tid = candidate.transactional_id
        outcomes.append(AbortOutcome(candidate, error, committer.admin.describe([tid])[tid]))
    return outcomes


def txn_dict(description: TxnDescription, now_ms: int | None = None) -> TxnDict:
    """The JSON form of a description; the age is taken at ``now_ms`` (default: now)."""
    started = description.start_time_ms if description.start_time_ms > 0 else None
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    return {
        "transactional_id": description.transactional_id,
        "state": description.state.value,
        "producer_id": description.producer_id,
        "epoch": description.epoch,
        "start_time_ms": started,
        "age_s": None if started is None else max(0.0, (now_ms - started) / 1000),
        "timeout_ms": description.timeout_ms,
        "partitions": [{"topic": t, "partition": p} for t, p in description.partitions],
    }


def listed_txn_dict(description: TxnDescription, queries: Mapping[OwnedId, Entry]) -> ListedTxnDict:
    """The JSON form of a listed transaction, with the query that named it."""
    owned = OwnedId.parse(description.transactional_id)
    entry = None if owned is None else queries.get(owned)
    query: QueryDict | None = None
    if owned is not None and entry is not None:
        registered = entry if isinstance(entry, Registration) else None
        query = {
            "prefix": owned.prefix,
            "owner": owned.owner,
            "checkpoint_location": None if registered is None else registered.location,
            "registered_ms": None if registered is None else registered.registered_ms,
            "unknown_reason": entry.reason if isinstance(entry, Unknown) else None,
        }
    return {**txn_dict(description), "query": query}


def abort_report(
    plan: Iterable[Candidate],
    outcomes: Iterable[AbortOutcome],
    *,
    dry_run: bool,
    decisions_checked: bool,
    now_ms: int | None = None,
) -> AbortReportDict:
    """The plan and what happened to each candidate."""
    by_id = {o.candidate.transactional_id: o for o in outcomes}
    entries: list[AbortEntryDict] = []
    for candidate in plan:
        outcome = by_id.get(candidate.transactional_id)
        result, error = _result(candidate, outcome, dry_run)
        before, after = candidate.description, None if outcome is None else outcome.now
        entries.append(
            {
                "transactional_id": candidate.transactional_id,
                "result": result.value,
                "decided_in": candidate.decided_in,
                "error": error,
                "before": None if before is None else txn_dict(before, now_ms),
                "after": None if after is None else txn_dict(after, now_ms),
            }
        )
    return {
        "version": 1,
        "dry_run": dry_run,
        "decisions_checked": decisions_checked,
        "transactions": entries,
        "summary": {r.value: sum(e["result"] == r.value for e in entries) for r in Result},
    }


def _result(
    candidate: Candidate, outcome: AbortOutcome | None, dry_run: bool
) -> tuple[Result, str | None]:
    if candidate.verdict == Verdict.NOT_OPEN:
        return Result.NOT_OPEN, None
    if candidate.verdict == Verdict.DECIDED:
        return Result.REFUSED, None
    if outcome is None:
        return (Result.WOULD_ABORT, None) if dry_run else (Result.ABORT_FAILED, "not attempted")
    failure = outcome.failure
    return (Result.ABORTED, None) if failure is None else (Result.ABORT_FAILED, failure)
