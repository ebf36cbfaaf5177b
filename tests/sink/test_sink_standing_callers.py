"""What each caller makes of "is this the open transaction we hold"
(:func:`~connectors.kafka.txn_state.standing_of`): every answer it can get, and the error it
raises for each, word for word what it raised before the answer had one place. The writer's
pre-commit and its check of a purged queue, the driver's verify, its refused commit and its
sweep of lingering transactions, and the operator's abort. No broker: a describe is a dict."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import replace

import kafka.errors as Errors
import pytest
from kafka.structs import TopicPartition

from checkpoint.deadline import Deadline
from checkpoint.model import Committable
from connectors.kafka.end_txn import EndTxnTarget
from connectors.kafka.fence import FenceOutcome, FenceResult
from connectors.kafka.partition_txns import BatchHeader, OpenOnPartition
from connectors.kafka.sink import exactly_once_writer, marker_repair
from connectors.kafka.sink.committer import KafkaCommitter
from connectors.kafka.sink.errors import (
    CommitUndeterminedError,
    PreCommitLostError,
    TransactionLostError,
)
from connectors.kafka.sink.exactly_once_writer import ExactlyOnceWriter
from connectors.kafka.sink.lifetime import CLOCK_SKEW_TOLERANCE_MS
from connectors.kafka.sink.naming import TransactionalIdNaming
from connectors.kafka.sink.writer import DeliveryFailed
from connectors.kafka.txn_state import TxnDescription, TxnState
from kafka_eos.operations.lingering import AbortOutcome, plan_abort

NAMING = TransactionalIdNaming("q", "0a1b2c3d")
TID = NAMING.transactional_id(0, 0)
P, E = 4_000, 7
NOW_MS = 1_700_000_060_000
START = NOW_MS - 1_000
OUT_0, OUT_1 = ("out", 0), ("out", 1)
OPEN = TxnDescription(TID, TxnState.ONGOING, P, E, 1, 60_000, START, (OUT_0, OUT_1))
ABORTED = replace(OPEN, state=TxnState.COMPLETE_ABORT, epoch=E + 1)
RIVAL = replace(OPEN, producer_id=P + 1, epoch=0)  # another attempt took the id


class Admin:
    """The coordinators, as a dict of descriptions; fences are recorded, and succeed. The
    partitions' leaders show ``opened`` (DescribeProducers), each range beginning with a batch
    of ``first`` (producer id, epoch)."""

    def __init__(self, *described: TxnDescription | None, bumps: bool = False) -> None:
        self.described: dict[str, TxnDescription | None] = {TID: None}
        self.described.update({d.transactional_id: d for d in described if d is not None})
        self.bumps = bumps
        self.fenced: list[EndTxnTarget] = []
        self.kafka_admin = self  # what DescribeProducers asks (the fixture ``leaders``)
        self.opened: list[OpenOnPartition] = []
        self.first: tuple[int, int] | None = (P, E)
        self.fetched: list[TopicPartition] = []

    def describe(self, ids: Iterable[str]) -> dict[str, TxnDescription | None]:
        return {tid: self.described.get(tid) for tid in ids}

    def epoch_bumps_on_end_at(self, coordinator_id: int) -> bool:
        return self.bumps

    def list_transactional_ids(self, prefix: str, *, ongoing_only: bool = True) -> list[str]:
        return sorted(tid for tid, d in self.described.items() if d is not None)

    def first_batch_at(self, tp: TopicPartition, offset: int) -> BatchHeader | None:
        """The batch ``first`` begins (None: the log no longer holds it)."""
        self.fetched.append(tp)
        return None if self.first is None else BatchHeader(offset, *self.first, True)

    def fence_transactions(
        self, targets: Sequence[EndTxnTarget], *, deadline: Deadline
    ) -> dict[str, FenceOutcome]:
        self.fenced += targets
        return {t.transactional_id: FenceOutcome(t, FenceResult.FENCED) for t in targets}


# -- the writer's pre-commit -------------------------------------------------------------------

ACKED_MS = START + 5


def writer(
    now: TxnDescription | None, *, own: tuple[int, int] | None = (P, E)
) -> ExactlyOnceWriter:
    """A writer past its flush: its statistics name producer id P, epoch E, partitions
    ``out``/0 and ``out``/1, a first record acknowledged at ACKED_MS."""
    w = ExactlyOnceWriter({"bootstrap.servers": "127.0.0.1:9"}, "out", [TID], 1.0)
    w._admin = Admin(now)  # type: ignore[assignment]
    w._stats.producer_id_and_epoch = own
    w._stats.first_acked_ms = ACKED_MS
    partitions = {str(p): {"partition": p, "txmsgs": 3} for _, p in (OUT_0, OUT_1)}
    w._stats._last = json.dumps({"topics": {"out": {"partitions": partitions}}})
    return w


def test_the_pre_commit_names_the_transaction_it_holds() -> None:
    w = writer(OPEN)
    w.record_count = 6
    assert w._describe_own_transaction() == Committable(TID, P, E, 6, (OUT_0, OUT_1), START)
    # Begun after the first acknowledgement, within the clocks' tolerated skew.
    late_but_skewed = replace(OPEN, start_time_ms=ACKED_MS + CLOCK_SKEW_TOLERANCE_MS)
    assert writer(late_but_skewed)._describe_own_transaction().start_time_ms > ACKED_MS


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        pytest.param(
            None, f"transaction {TID} is not open after its flush (unknown id): ", id="unknown"
        ),
        pytest.param(
            ABORTED,
            f"transaction {TID} is not open after its flush (CompleteAbort): ",
            id="not open",
        ),
        pytest.param(
            RIVAL,
            f"transaction {TID} was fenced after its flush: this task holds producer id {P}, "
            f"epoch {E}, but the open transaction is producer id {P + 1}, epoch 0. ",
            id="fenced",
        ),
        pytest.param(
            replace(OPEN, partitions=(OUT_1,)),
            f"transaction {TID} (producer id {P}, epoch {E}) is not the one this task wrote: its "
            f"coordinator lists partitions [{OUT_1}], without [{OUT_0}] that this producer wrote "
            f"to, and says it began at {START} ms, against {ACKED_MS} ms when",
            id="partition missing",
        ),
        pytest.param(
            replace(OPEN, start_time_ms=ACKED_MS + CLOCK_SKEW_TOLERANCE_MS + 1),
            f"transaction {TID} (producer id {P}, epoch {E}) is not the one this task wrote: its "
            f"coordinator lists partitions [{OUT_0}, {OUT_1}], without [] that this producer "
            f"wrote to, and says it began at {ACKED_MS + CLOCK_SKEW_TOLERANCE_MS + 1} ms",
            id="begun again",
        ),
    ],
)
def test_the_pre_commit_refuses_any_other_transaction(
    now: TxnDescription | None, expected: str
) -> None:
    with pytest.raises(DeliveryFailed) as raised:
        writer(now)._describe_own_transaction()
    assert str(raised.value).startswith(f"[{DeliveryFailed.code}] {expected}")


@pytest.mark.parametrize(
    ("now", "own"),
    [
        pytest.param(OPEN, (P, E), id="held"),
        # Only the producer id and epoch are asked: the purge is a fence, or it is not.
        pytest.param(replace(OPEN, partitions=(), start_time_ms=NOW_MS), (P, E), id="held, later"),
        pytest.param(None, (P, E), id="unknown"),
        pytest.param(ABORTED, None, id="own producer unknown"),
    ],
)
def test_a_purge_not_shown_as_a_fence_is_left_to_the_delivery_error(
    now: TxnDescription | None, own: tuple[int, int] | None
) -> None:
    writer(now, own=own)._raise_why_purged()


@pytest.mark.parametrize(
    ("now", "shown"),
    [
        pytest.param(ABORTED, f"CompleteAbort at producer id {P}, epoch {E + 1}", id="not open"),
        pytest.param(RIVAL, f"Ongoing at producer id {P + 1}, epoch 0", id="fenced"),
    ],
)
def test_a_purge_shown_as_a_fence_says_so(now: TxnDescription, shown: str) -> None:
    with pytest.raises(DeliveryFailed) as raised:
        writer(now)._raise_why_purged()
    assert str(raised.value).startswith(
        f"[{DeliveryFailed.code}] transaction {TID} (producer id {P}, epoch {E}) was fenced "
        f"while the task wrote: its id is now {shown}. The driver aborted it"
    )


# -- the writer's check of a range joined after an abort ----------------------------------------


@pytest.fixture
def leaders(monkeypatch: pytest.MonkeyPatch) -> None:
    """DescribeProducers answered from the writer's :class:`Admin`; no broker asked."""
    for module in (exactly_once_writer, marker_repair):
        monkeypatch.setattr(module, "open_on_partitions", lambda admin, tps: admin.opened)
    monkeypatch.setattr(marker_repair, "unstable_partitions", lambda *a, **k: [])


OWN_RANGE = OpenOnPartition("out", 0, P, E, 3, 40, START + 10)
# The id before this attempt took it (at epoch E): its last transaction at E - 2 ended, which
# moved the epoch to E - 1 under transactions V2 and left it at E - 2 under V1.
COMMITTED_V2 = replace(OPEN, state=TxnState.COMPLETE_COMMIT, epoch=E - 1)
COMMITTED_V1 = replace(OPEN, state=TxnState.COMPLETE_COMMIT, epoch=E - 2)
ABORTED_BEFORE = replace(OPEN, state=TxnState.COMPLETE_ABORT, epoch=E - 1)


def refuse_a_joined_range(w: ExactlyOnceWriter, taken_from: TxnDescription) -> None:
    w._refuse_a_joined_range(w._describe_own_transaction(), taken_from)


@pytest.mark.parametrize(
    ("taken_from", "first"),
    [
        (ABORTED_BEFORE, (P, E - 2)),
        (replace(ABORTED_BEFORE, state=TxnState.EMPTY), (P, E - 2)),
        (ABORTED_BEFORE, (P + 9, 0)),
        (ABORTED_BEFORE, None),
        # The gap of checking only the first transaction after an abort: an abort the driver
        # never saw left a range at E - 4; the id's next transaction wrote elsewhere and
        # committed; this one writes to the range's partition.
        (COMMITTED_V2, (P, E - 4)),
        (COMMITTED_V1, (P, E - 4)),
    ],
    ids=[
        "after an abort, an earlier epoch's",
        "after an abort, on an Empty id",
        "another producer's",
        "a range whose start the log no longer holds",
        "after a commit (V2), an epoch before the committed one",
        "after a commit (V1), an epoch before the committed one",
    ],
)
def test_a_transaction_that_joined_an_aborted_range_is_refused(
    leaders, taken_from: TxnDescription, first: tuple[int, int] | None
) -> None:
    w = writer(OPEN)
    w._admin.opened, w._admin.first = [OWN_RANGE], first  # type: ignore[union-attr]
    with pytest.raises(DeliveryFailed, match=r"joined an aborted transaction's records on out-0"):
        refuse_a_joined_range(w, taken_from)


@pytest.mark.parametrize(
    ("taken_from", "first"),
    [
        (ABORTED_BEFORE, (P, E)),
        (COMMITTED_V2, (P, E)),
        # A COMMIT marker the driver did not write (KAFKA-20734): this commit completes it.
        (COMMITTED_V2, (P, E - 2)),
        (COMMITTED_V1, (P, E - 2)),
    ],
    ids=[
        "its own",
        "its own after a commit",
        "the committed one's (V2)",
        "the committed one's (V1)",
    ],
)
def test_a_transaction_whose_range_it_may_join_passes(
    leaders, taken_from: TxnDescription, first: tuple[int, int]
) -> None:
    w = writer(OPEN)
    other = replace(OWN_RANGE, producer_id=P + 1)  # another task's, which it may be
    w._admin.opened, w._admin.first = [OWN_RANGE, other], first  # type: ignore[union-attr]
    refuse_a_joined_range(w, taken_from)


def test_a_leader_that_moves_during_the_check_is_waited_out(monkeypatch) -> None:
    """Spark's local mode fails a query on its first task failure: a leader's move (a rolling
    restart) must not fail the pre-commit."""
    answers: list[object] = [
        Errors.NotLeaderForPartitionError("out-0 moved"),
        Errors.UnknownBrokerIdError("-1"),  # no leader for a moment: kafka-python asks node -1
        [OWN_RANGE],
    ]

    def moving(admin: object, tps: object) -> list[OpenOnPartition]:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[return-value]

    monkeypatch.setattr(exactly_once_writer, "open_on_partitions", moving)
    w = writer(OPEN)
    w._admin.first = (P, E - 4)  # type: ignore[union-attr]
    with pytest.raises(DeliveryFailed, match=r"joined an aborted transaction's records on out-0"):
        refuse_a_joined_range(w, COMMITTED_V2)
    assert answers == []


@pytest.mark.parametrize(("end", "fetched"), [(41, True), (40, False)])
def test_only_a_range_begun_before_the_take_has_its_first_batch_fetched(
    leaders, end: int, fetched: bool
) -> None:
    """The range begins at offset 40 with an aborted epoch's batch. Where the partition ended
    at 41 when the id was taken, the range is an earlier transaction's: refused. Had it ended
    at 40, the range could only be this transaction's, and nothing is fetched."""
    w = writer(OPEN)
    w._admin.opened, w._admin.first = [OWN_RANGE], (P, E - 4)  # type: ignore[union-attr]
    w._ends_at_take = {TopicPartition("out", 0): end}
    if fetched:
        with pytest.raises(DeliveryFailed, match="joined an aborted transaction's records"):
            refuse_a_joined_range(w, COMMITTED_V2)
    else:
        refuse_a_joined_range(w, COMMITTED_V2)
    assert w._admin.fetched == ([TopicPartition("out", 0)] if fetched else [])  # type: ignore[union-attr]


@pytest.mark.parametrize("fails", [False, True], ids=["read", "unknown: no leader"])
def test_each_topics_ends_are_read_after_the_init_before_its_first_record(
    monkeypatch: pytest.MonkeyPatch, fails: bool
) -> None:
    """After ``init_transactions`` (``_open``) fenced the earlier epochs, once per topic; a
    partition without a leader must not fail a task that may never write to it."""
    w = writer(OPEN)
    w._taken_from = COMMITTED_V2
    steps: list[str] = []
    monkeypatch.setattr(w, "_open", lambda topic: steps.append(f"init {topic}") or object())

    def ends(admin: object, topic: str, *, timeout_ms: int) -> dict[TopicPartition, int]:
        steps.append(f"ends {topic}")
        if fails:
            raise Errors.UnknownBrokerIdError("-1")
        return {TopicPartition(topic, 0): 40}

    monkeypatch.setattr(exactly_once_writer, "end_offsets", ends)
    for topic in ("out", "out", "audit", "out"):
        w._producer_for(topic)
    assert steps == ["init out", "ends out", "ends audit"]
    known = {} if fails else {TopicPartition("out", 0): 40, TopicPartition("audit", 0): 40}
    assert w._ends_at_take == known


def test_a_principal_that_may_not_read_the_partitions_is_told_the_acl(monkeypatch) -> None:
    def refused(admin: object, tps: object) -> list[OpenOnPartition]:
        raise Errors.TopicAuthorizationFailedError("DescribeProducers of out-0")

    monkeypatch.setattr(exactly_once_writer, "open_on_partitions", refused)
    w = writer(OPEN)
    with pytest.raises(DeliveryFailed, match=r"--operation Read --operation Describe --topic"):
        refuse_a_joined_range(w, COMMITTED_V2)


@pytest.mark.parametrize(
    "last", [None, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT, TxnState.EMPTY]
)
def test_every_transaction_of_an_id_that_held_one_is_checked(
    monkeypatch: pytest.MonkeyPatch, last: TxnState | None
) -> None:
    w = writer(None)
    before = None if last is None else replace(OPEN, state=last, epoch=E - 1)
    w._admin.described[TID] = before  # type: ignore[union-attr]
    monkeypatch.setattr(w, "_new_producer", lambda config: object())
    monkeypatch.setattr(w, "_connect", lambda producer, topic: None)
    w._producer_on_a_free_id("out")
    assert w._taken_from == before


# -- the driver: verify, a refused commit, the sweep ------------------------------------------

DECIDED = Committable(TID, P, E, 6, (OUT_0, OUT_1), START)


def committer(*described: TxnDescription | None, bumps: bool = False) -> KafkaCommitter:
    c = KafkaCommitter({}, NAMING, 30.0, wall_clock=lambda: NOW_MS / 1000)
    c._admin = Admin(*described, bumps=bumps)  # type: ignore[assignment]
    return c


def test_verify_passes_the_transaction_the_task_left() -> None:
    committer(OPEN).verify(3, [DECIDED])


@pytest.mark.parametrize(
    ("now", "detail"),
    [
        pytest.param(None, "the id is unknown", id="unknown"),
        *(
            pytest.param(
                now,
                f"expected Ongoing with producer id {P} and epoch {E}, begun at {START}, found "
                f"{now.state.value} with producer id {now.producer_id} and epoch {now.epoch}, "
                f"begun at {now.start_time_ms}",
                id=name,
            )
            for name, now in [
                ("not open", ABORTED),
                ("fenced", RIVAL),
                ("begun again", replace(OPEN, start_time_ms=START + 1)),
            ]
        ),
        pytest.param(
            replace(OPEN, partitions=(OUT_1,)),
            f"its coordinator no longer lists partitions [{OUT_0}] in it: it was ended and begun "
            "again at the same epoch, and their records are gone",
            id="partition missing",
        ),
    ],
)
def test_verify_refuses_anything_else(now: TxnDescription | None, detail: str) -> None:
    with pytest.raises(PreCommitLostError) as raised:
        committer(now).verify(3, [DECIDED])
    assert raised.value.transactional_id == TID
    assert detail in str(raised.value)


def test_verify_refuses_a_transaction_held_without_the_commit_margin_left() -> None:
    old = NOW_MS - 50_000
    with pytest.raises(PreCommitLostError) as raised:
        committer(replace(OPEN, start_time_ms=old)).verify(3, [replace(DECIDED, start_time_ms=old)])
    assert (
        "it began 50.0 s ago and the broker aborts it after transaction.timeout.ms = 60000: "
        "10.0 s left, below the commit margin of 15.0 s"
    ) in str(raised.value)


def test_a_refused_commit_of_a_transaction_still_held_is_retried_at_the_restart() -> None:
    with pytest.raises(Errors.TransactionalIdAuthorizationFailedError) as raised:
        committer(OPEN)._check_committed(DECIDED, Errors.TransactionalIdAuthorizationFailedError)
    assert str(raised.value) == (
        f"[Error 53] TransactionalIdAuthorizationFailedError: EndTxn(commit) of {TID} answered "
        "TransactionalIdAuthorizationFailedError; the transaction is still open and is "
        "committed again at the next restart"
    )


@pytest.mark.parametrize(
    ("now", "error", "seen"),
    [
        pytest.param(
            replace(ABORTED, start_time_ms=START),
            TransactionLostError,
            f"now CompleteAbort with producer id {P}, epoch {E + 1}, begun at {START} (this one "
            f"began at {START})",
            id="lost",
        ),
        pytest.param(None, CommitUndeterminedError, "unknown to its coordinator", id="unknown"),
        pytest.param(
            replace(OPEN, start_time_ms=START + 1),
            CommitUndeterminedError,
            f"now Ongoing with producer id {P}, epoch {E}, begun at {START + 1} (this one began "
            f"at {START})",
            id="begun again",
        ),
    ],
)
def test_a_refused_commit_of_anything_else_is_lost_or_undetermined(
    now: TxnDescription | None, error: type[Exception], seen: str
) -> None:
    with pytest.raises(error) as raised:
        committer(now)._check_committed(DECIDED, Errors.InvalidProducerEpochError)
    assert type(raised.value) is error
    assert f"EndTxn(commit) answered InvalidProducerEpochError; the id is {seen}" in str(
        raised.value
    )


@pytest.mark.parametrize("bumps", [False, True])
def test_a_refused_commit_of_a_committed_transaction_is_success(bumps: bool) -> None:
    done = replace(OPEN, state=TxnState.COMPLETE_COMMIT, epoch=E + bumps)
    committer(done, bumps=bumps)._check_committed(DECIDED, Errors.InvalidProducerEpochError)


def test_the_sweep_fences_every_open_transaction_no_decision_holds(leaders) -> None:
    ids = [NAMING.transactional_id(0, slot) for slot in range(5)]
    open_ = [replace(OPEN, transactional_id=tid) for tid in ids]
    c = committer(
        open_[0],  # decided: kept
        open_[1],  # decided twice, at an earlier epoch too: kept
        replace(open_[2], epoch=E + 1),  # fenced: the decision names an earlier epoch
        open_[3],  # no decision names it
        replace(open_[4], start_time_ms=START + 1),  # begun again: only id and epoch count
    )
    keep = [replace(DECIDED, transactional_id=tid) for tid in (ids[0], ids[1], ids[2], ids[4])]
    c.abort_lingering([*keep, replace(keep[1], epoch=E - 1)])
    assert [(t.transactional_id, t.epoch) for t in c.admin.fenced] == [  # type: ignore[attr-defined]
        (ids[2], E + 1),
        (ids[3], E),
    ]


# -- the operator's abort ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("after", "error", "failure"),
    [
        pytest.param(OPEN, None, "still Ongoing at its epoch after the fence", id="held"),
        pytest.param(OPEN, "timed out", "timed out", id="held, and the fence failed"),
        pytest.param(ABORTED, None, None, id="not open"),
        pytest.param(replace(OPEN, epoch=E + 1), None, None, id="fenced, a new one open"),
        pytest.param(replace(OPEN, start_time_ms=START + 1), None, None, id="begun again"),
        pytest.param(None, None, None, id="unknown"),
        pytest.param(None, "refused", "refused", id="unknown, and the fence failed"),
    ],
)
def test_an_abort_fails_only_while_the_transaction_it_fenced_is_held(
    after: TxnDescription | None, error: str | None, failure: str | None
) -> None:
    (candidate,) = plan_abort({TID: OPEN}, None)
    assert AbortOutcome(candidate, error, after).failure == failure
