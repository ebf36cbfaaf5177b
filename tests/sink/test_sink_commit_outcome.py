"""The oracle for "is this decided transaction committed?", written from the protocol, not
from the code: what DescribeTransactions shows after each way a transaction of producer id
P, epoch E can end, under transactions V1 (Kafka 3.x: the epoch stays at EndTxn) and V2
(Kafka 4.x: EndTxn bumps it), and after the id moved on. A re-driven commit that gets this
wrong either reports a committed batch as lost (an operator then re-processes it:
duplicates) or a lost one as committed (silent loss). ``bump_possible``: the coordinator
speaks EndTxn v5 (V2) now."""

from __future__ import annotations

from dataclasses import replace

import pytest

from checkpoint.model import Committable
from connectors.kafka.sink.outcome import Outcome, outcome
from connectors.kafka.txn_state import TxnDescription, TxnState

P, E = 4_000, 7
OTHER_P = 4_001


def shown(state: TxnState, producer_id: int, epoch: int) -> TxnDescription:
    return TxnDescription("q-0a1b2c3d-0-0", state, producer_id, epoch, 1, 60_000, -1, ())


CASES = [
    # (what happened, shown now, committed when a V1-only coordinator answers, ... a V2 one)
    ("V1 EndTxn(commit) marked", shown(TxnState.COMPLETE_COMMIT, P, E), True, True),
    ("V1 EndTxn(commit) marking", shown(TxnState.PREPARE_COMMIT, P, E), True, True),
    # V2 shows E + 1; so does a transaction begun under V1 and ended after a rolling upgrade.
    ("V2 EndTxn(commit) marked", shown(TxnState.COMPLETE_COMMIT, P, E + 1), False, True),
    ("V2 EndTxn(commit) marking", shown(TxnState.PREPARE_COMMIT, P, E + 1), False, True),
    ("still open, as pre-committed", shown(TxnState.ONGOING, P, E), False, False),
    ("V1 EndTxn(abort)", shown(TxnState.COMPLETE_ABORT, P, E), False, False),
    ("V1 abort marking", shown(TxnState.PREPARE_ABORT, P, E), False, False),
    ("timeout abort (fence bumps)", shown(TxnState.COMPLETE_ABORT, P, E + 1), False, False),
    ("fenced by InitProducerId, new one open", shown(TxnState.ONGOING, P, E + 1), False, False),
    ("V2: the next transaction committed", shown(TxnState.COMPLETE_COMMIT, P, E + 2), False, False),
    ("an earlier transaction committed", shown(TxnState.COMPLETE_COMMIT, P, E - 1), False, False),
    ("epoch fence in progress", shown(TxnState.PREPARE_EPOCH_FENCE, P, E), False, False),
    ("nothing since InitProducerId", shown(TxnState.EMPTY, P, E + 1), False, False),
    # V2 epoch overflow moves the id to a new producer id: not recognised (a false stop,
    # never a silent loss; the broker itself answers a retried EndTxn with success).
    ("another producer id, same epoch", shown(TxnState.COMPLETE_COMMIT, OTHER_P, E), False, False),
    ("another producer id, E + 1", shown(TxnState.COMPLETE_COMMIT, OTHER_P, E + 1), False, False),
    ("another producer id, epoch 0", shown(TxnState.COMPLETE_COMMIT, OTHER_P, 0), False, False),
]


@pytest.mark.parametrize(("case", "now", "v1", "v2"), CASES, ids=[c[0] for c in CASES])
def test_only_a_commit_of_the_transaction_is_taken_for_it(
    case: str, now: TxnDescription, v1: bool, v2: bool
) -> None:
    assert now.is_commit_of(P, E, bump_possible=False) is v1, case
    assert now.is_commit_of(P, E, bump_possible=True) is v2, case


# -- where a decided transaction stands: connectors.kafka.sink.outcome ----------------------

START, LATER = 1_700_000_000_000, 1_700_000_009_000
DECIDED = Committable("q-0a1b2c3d-0-0", P, E, 10, (("out", 0),), START)
BEFORE_START_TIMES = replace(DECIDED, start_time_ms=-1)  # decided by an earlier release


def at(state: TxnState, producer_id: int, epoch: int, start: int) -> TxnDescription:
    return TxnDescription("q-0a1b2c3d-0-0", state, producer_id, epoch, 1, 60_000, start, ())


C, OK, L, U = Outcome.COMMITTED, Outcome.COMMITTABLE, Outcome.LOST, Outcome.UNDETERMINED
OUTCOMES = [
    # (what happened, shown now, bump_possible, outcome with its start time, without one)
    ("V1 commit", at(TxnState.COMPLETE_COMMIT, P, E, START), False, C, C),
    ("V2 commit", at(TxnState.COMPLETE_COMMIT, P, E + 1, START), True, C, C),
    ("V2 commit marking", at(TxnState.PREPARE_COMMIT, P, E + 1, START), True, C, C),
    ("still open as decided", at(TxnState.ONGOING, P, E, START), False, OK, OK),
    # Evidence that this very transaction was aborted: its own start time, kept through the
    # abort on every version (the timeout and a fence bump the epoch).
    # Without a start time an abort is never taken for this transaction's: it may be a later
    # one's, begun after this one committed (a late attempt that aborted its own).
    ("aborted at its timeout", at(TxnState.COMPLETE_ABORT, P, E + 1, START), False, L, U),
    ("aborting", at(TxnState.PREPARE_ABORT, P, E + 1, START), False, L, U),
    ("aborted at its epoch", at(TxnState.COMPLETE_ABORT, P, E, START), False, L, U),
    # The id moved on: what the coordinator shows is a later transaction, a fence or nothing,
    # and says nothing of this one. It may have committed first: never call it lost.
    ("a later transaction aborted", at(TxnState.COMPLETE_ABORT, P, E + 2, LATER), False, U, U),
    ("a later one aborted at E + 1", at(TxnState.COMPLETE_ABORT, P, E + 1, LATER), False, U, U),
    ("a later one committed", at(TxnState.COMPLETE_COMMIT, P, E + 2, LATER), True, U, U),
    ("V1: E + 1 committed is later", at(TxnState.COMPLETE_COMMIT, P, E + 1, LATER), False, U, U),
    ("begun again at its epoch", at(TxnState.ONGOING, P, E, LATER), False, U, OK),
    ("a later one open", at(TxnState.ONGOING, P, E + 3, LATER), False, U, U),
    ("initialized again (3.x keeps the start)", at(TxnState.EMPTY, P, E + 2, START), False, U, U),
    ("initialized again (4.x forgets it)", at(TxnState.EMPTY, P, E + 1, -1), True, U, U),
    ("another producer id", at(TxnState.COMPLETE_COMMIT, OTHER_P, 0, LATER), True, U, U),
    ("the id is unknown (expired)", None, False, U, U),
]


@pytest.mark.parametrize(
    ("case", "now", "bump_possible", "with_start", "without_start"),
    OUTCOMES,
    ids=[c[0] for c in OUTCOMES],
)
def test_a_decided_transaction_stands_where_the_evidence_says(
    case: str,
    now: TxnDescription | None,
    bump_possible: bool,
    with_start: Outcome,
    without_start: Outcome,
) -> None:
    assert outcome(DECIDED, now, bump_possible=bump_possible) is with_start, case
    assert outcome(BEFORE_START_TIMES, now, bump_possible=bump_possible) is without_start, case
