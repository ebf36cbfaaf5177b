"""The oracle for "is this decided transaction committed?", written from the protocol, not
from the code: what DescribeTransactions shows after each way a transaction of producer id
P, epoch E can end, under transactions V1 (Kafka 3.x: the epoch stays at EndTxn) and V2
(Kafka 4.x: EndTxn bumps it), and after the id moved on. A re-driven commit that gets this
wrong either reports a committed batch as lost (a false stop) or a lost one as committed
(silent loss). ``bump_possible``: the coordinator speaks EndTxn v5 (V2) now."""

from __future__ import annotations

import pytest

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
