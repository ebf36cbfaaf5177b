"""The judgement of an open range left by a confirmed batch (connectors.kafka.sink.owed_markers):
a COMMIT marker is written only where it commits exactly the decided transaction's records.
The brokers' side is integration_tests/sink/test_skipped_commit_markers.py."""

from __future__ import annotations

import doctest
import importlib.machinery
import sys
import types
from dataclasses import replace

import pytest

import connectors.kafka.sink.owed_markers
from checkpoint.model import Committable
from connectors.kafka.partition_txns import BatchHeader, OpenOnPartition
from connectors.kafka.sink.owed_markers import (
    MAX_EPOCH,
    Marked,
    Reason,
    Repair,
    Stop,
    Verdict,
    Wait,
    judge,
)
from connectors.kafka.txn_state import TxnDescription, TxnState
from connectors.spark import sink as spark_sink

P, E, START = 4_000, 7, 1_700_000_000_000
C = Committable("q-0a1b2c3d-0-0", P, E, 10, (("out", 0),), START)
OPEN = OpenOnPartition("out", 0, P, E, 3, 120, START + 500)  # coordinator epoch 3
FIRST = BatchHeader(120, P, E, True)
COMMITTED = TxnDescription(
    C.transactional_id, TxnState.COMPLETE_COMMIT, P, E + 1, 1, 60_000, START, ()
)


# (case, open range, its first batch, the coordinator's view, V2, the verdict or a Stop's reason)
Expected = Verdict | Reason
Case = tuple[str, OpenOnPartition, BatchHeader | None, TxnDescription | None, bool, Expected]
LATER = START + 9_000  # a later transaction of the id began then
CASES: list[Case] = [
    ("committed at E + 1 under V2: the marker at E + 1",
     OPEN, FIRST, COMMITTED, True, Repair(E + 1, 3)),
    ("the id moved on, the partition untouched",
     OPEN, FIRST, replace(COMMITTED, state=TxnState.ONGOING, epoch=E + 2, start_time_ms=LATER),
     True, Repair(E + 1, 3)),
    ("a later abort of the id, begun after",
     OPEN, FIRST,
     replace(COMMITTED, state=TxnState.COMPLETE_ABORT, epoch=E + 3, start_time_ms=LATER),
     True, Repair(E + 1, 3)),
    ("markers in flight",
     OPEN, FIRST, replace(COMMITTED, state=TxnState.PREPARE_COMMIT), True,
     Wait(Reason.COORDINATOR_PREPARING)),
    ("a later transaction's fence in flight",
     OPEN, FIRST, replace(COMMITTED, state=TxnState.PREPARE_EPOCH_FENCE, epoch=E + 2), True,
     Wait(Reason.COORDINATOR_PREPARING)),
    ("an older range of the producer, without this transaction",
     replace(OPEN, producer_epoch=E - 2), BatchHeader(100, P, E - 2, True), COMMITTED, True,
     Marked()),
    ("a later transaction's own range, after this one's marker",
     replace(OPEN, producer_epoch=E + 2, start_offset=130), BatchHeader(130, P, E + 2, True),
     COMMITTED, True,
     Marked()),
    ("a later transaction joined the range",
     replace(OPEN, producer_epoch=E + 2), FIRST, COMMITTED, True, Reason.JOINED),
    ("the range begins with an earlier transaction's records",
     OPEN, BatchHeader(120, P, E - 1, True), COMMITTED, True, Reason.JOINED),
    ("under V1 the epoch tells no commit",
     OPEN, FIRST, replace(COMMITTED, epoch=E), False, Reason.V1),
    ("a V1 commit (at its own epoch) seen at a coordinator now on V2",
     OPEN, FIRST, replace(COMMITTED, epoch=E), True, Reason.V1),
    ("the coordinator shows this very transaction aborted",
     OPEN, FIRST, replace(COMMITTED, state=TxnState.COMPLETE_ABORT), True, Reason.INCONSISTENT),
    ("the coordinator shows it still open at its epoch",
     OPEN, FIRST, replace(COMMITTED, state=TxnState.ONGOING, epoch=E), True, Reason.INCONSISTENT),
    ("the id unknown to its coordinator",
     OPEN, FIRST, None, True, Reason.INCONSISTENT),
    ("the range's start no longer in the log",
     OPEN, None, COMMITTED, True, Reason.INCONSISTENT),
    ("another producer's batch at the start",
     OPEN, BatchHeader(120, P + 1, E, True), COMMITTED, True, Reason.INCONSISTENT),
    ("a batch that is not transactional at the start",
     OPEN, BatchHeader(120, P, E, False), COMMITTED, True, Reason.INCONSISTENT),
    ("a marker at the start",
     OPEN, BatchHeader(120, P, E, True, control=True), COMMITTED, True, Reason.INCONSISTENT),
    ("the start gone, the next batch answered",
     OPEN, BatchHeader(125, P, E, True), COMMITTED, True, Reason.INCONSISTENT),
]  # fmt: skip


@pytest.mark.parametrize(
    ("open_", "first", "now", "v2", "expected"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_judge(
    open_: OpenOnPartition,
    first: BatchHeader | None,
    now: TxnDescription | None,
    v2: bool,
    expected: Expected,
) -> None:
    verdict = judge(C, open_, first, now, v2=v2)
    if isinstance(expected, Reason):
        assert isinstance(verdict, Stop) and verdict.reason is expected, verdict
        assert verdict.detail
    else:
        assert verdict == expected


def test_an_exhausted_epoch_is_not_repaired() -> None:
    """A commit at the last epoch but one moved the id to a new producer id: the marker's
    epoch is not known, so no marker is written."""
    c = replace(C, epoch=MAX_EPOCH - 1)
    open_, first = replace(OPEN, producer_epoch=c.epoch), replace(FIRST, producer_epoch=c.epoch)
    verdict = judge(c, open_, first, replace(COMMITTED, producer_id=P + 1, epoch=0), v2=True)
    assert isinstance(verdict, Stop) and verdict.reason is Reason.INCONSISTENT


def test_no_repair_without_v2_whatever_the_coordinator_shows() -> None:
    """Every coordinator view that passes under V2 stops under V1."""
    for _, open_, first, now, v2, expected in CASES:
        if v2 and isinstance(expected, Repair):
            verdict = judge(C, open_, first, now, v2=False)
            assert isinstance(verdict, Stop) and verdict.reason is Reason.V1


def test_the_doc_examples_run() -> None:
    result = doctest.testmod(connectors.kafka.sink.owed_markers)
    assert result.attempted > 0 and result.failed == 0


def test_only_sparks_commit_runner_skips_the_look(monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer's builds in Spark's commit runner (a daemon's worker that imported its module,
    or the module run as __main__) come after the tasks: they skip the look; others do not."""
    assert not spark_sink._in_commit_runner()
    monkeypatch.setitem(sys.modules, spark_sink._COMMIT_RUNNER, types.ModuleType("runner"))
    assert spark_sink._in_commit_runner()
    monkeypatch.delitem(sys.modules, spark_sink._COMMIT_RUNNER)
    main = types.ModuleType("__main__")
    main.__spec__ = importlib.machinery.ModuleSpec(spark_sink._COMMIT_RUNNER, None)
    monkeypatch.setitem(sys.modules, "__main__", main)
    assert spark_sink._in_commit_runner()
