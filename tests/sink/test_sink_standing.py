"""Whether an id's open transaction is the one a producer holds: every answer of
:func:`~connectors.kafka.txn_state.standing_of`, the one place the writer, the committer, the
sweep and the operator commands ask it. Pure logic, no broker; what each caller makes of the
answers is in ``test_sink_standing_callers.py``."""

from __future__ import annotations

import doctest
from dataclasses import replace

import pytest

import connectors.kafka.txn_state
from connectors.kafka.txn_state import Standing, TxnDescription, TxnState, standing_of

P, E, START = 4_000, 7, 1_700_000_000_000
OUT_0, OUT_1, GONE = ("out", 0), ("out", 1), ("out", 2)
OPEN = TxnDescription("q-0a1b2c3d-0-0", TxnState.ONGOING, P, E, 1, 60_000, START, (OUT_0, OUT_1))


def shown(state: TxnState, **changes: int) -> TxnDescription:
    return replace(OPEN, state=state, **changes)


H, M, B, F, N, U = (
    Standing.HELD,
    Standing.PARTITION_MISSING,
    Standing.BEGUN_AGAIN,
    Standing.FENCED,
    Standing.NOT_OPEN,
    Standing.UNKNOWN,
)
CASES = [
    # (what, described now, producer id, epoch, what the caller knows, the answer)
    ("ours, nothing else known", OPEN, P, E, {}, H),
    ("ours, as recorded", OPEN, P, E, {"start_time_ms": START, "partitions": [OUT_0, OUT_1]}, H),
    ("ours, fewer partitions written", OPEN, P, E, {"partitions": [OUT_1]}, H),
    ("ours, begun by the bound", OPEN, P, E, {"begun_by_ms": START}, H),
    ("recorded start unknown (earlier release)", OPEN, P, E, {"start_time_ms": -1}, H),
    ("shown start unknown", replace(OPEN, start_time_ms=-1), P, E, {"start_time_ms": START}, H),
    ("a partition written to is gone", OPEN, P, E, {"partitions": [OUT_0, GONE]}, M),
    ("begun at another time", OPEN, P, E, {"start_time_ms": START - 1}, B),
    ("begun after the bound", OPEN, P, E, {"begun_by_ms": START - 1}, B),
    # Begun again comes before a missing partition: both mean the same, the time is asked first.
    ("begun again, partition gone", OPEN, P, E, {"start_time_ms": 1, "partitions": [GONE]}, B),
    ("another epoch", OPEN, P, E - 1, {}, F),
    ("a later epoch", OPEN, P, E + 1, {}, F),
    ("another producer id", OPEN, P + 1, E, {"start_time_ms": START}, F),
    ("ended: committed", shown(TxnState.COMPLETE_COMMIT), P, E, {}, N),
    ("ended: aborted by a fence", shown(TxnState.COMPLETE_ABORT, epoch=E + 1), P, E, {}, N),
    ("committing", shown(TxnState.PREPARE_COMMIT), P, E, {}, N),
    ("aborting", shown(TxnState.PREPARE_ABORT), P, E, {}, N),
    ("nothing begun", shown(TxnState.EMPTY, start_time_ms=-1), P, E, {}, N),
    ("epoch fence in progress", shown(TxnState.PREPARE_EPOCH_FENCE), P, E, {}, N),
    ("not open, another producer", shown(TxnState.DEAD, producer_id=P + 1), P, E, {}, N),
    ("the id is unknown", None, P, E, {"start_time_ms": START, "partitions": [OUT_0]}, U),
]


@pytest.mark.parametrize(
    ("case", "now", "producer_id", "epoch", "known", "answer"), CASES, ids=[c[0] for c in CASES]
)
def test_each_answer(
    case: str,
    now: TxnDescription | None,
    producer_id: int,
    epoch: int,
    known: dict,
    answer: Standing,
) -> None:
    assert standing_of(now, producer_id, epoch, **known) is answer, case


def test_every_answer_is_tested() -> None:
    assert {c[-1] for c in CASES} == set(Standing)


def test_missing_partitions_are_listed_sorted() -> None:
    assert OPEN.missing([("z", 1), OUT_0, ("a", 3), OUT_1]) == [("a", 3), ("z", 1)]
    assert OPEN.missing([]) == []


def test_the_doc_examples_run() -> None:
    result = doctest.testmod(connectors.kafka.txn_state)
    assert result.attempted > 0 and result.failed == 0
