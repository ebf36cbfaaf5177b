"""Which lingering transactions ``txn abort`` may abort: the pure part, no broker."""

from __future__ import annotations

from dataclasses import replace

import kafka.errors as Errors
import pytest
from cli_fakes import NOW_MS, FakeAdmin, FakeCommitter, ongoing

from checkpoint.errors import DeadlineExceeded
from checkpoint.model import Committable
from connectors.kafka.sink.errors import AbortMarkerSkippedError
from connectors.kafka.sink.listing import open_transactions
from connectors.kafka.sink.owed_markers import Reason
from connectors.kafka.txn_state import TxnState
from kafka_eos.operations.lingering import (
    AbortOutcome,
    LingeringTransactionError,
    Result,
    Verdict,
    abort_lingering,
    abort_report,
    decided_transactions,
    plan_abort,
    txn_dict,
)


def test_plan_aborts_ongoing_transactions_when_decisions_are_unknown() -> None:
    plan = plan_abort({"orders-0": ongoing("orders-0"), "orders-1": ongoing("orders-1")}, None)
    assert [(c.transactional_id, c.verdict) for c in plan] == [
        ("orders-0", Verdict.ABORT),
        ("orders-1", Verdict.ABORT),
    ]


def test_plan_refuses_the_transaction_of_an_unconfirmed_decision() -> None:
    described = {"orders-0": ongoing("orders-0", 7, 3), "orders-1": ongoing("orders-1", 8, 4)}
    plan = plan_abort(described, {("orders-1", 8, 4): 12})
    assert [(c.verdict, c.decided_in) for c in plan] == [
        (Verdict.ABORT, None),
        (Verdict.DECIDED, 12),
    ]


@pytest.mark.parametrize(("producer_id", "epoch"), [(7, 2), (9, 3)])
def test_a_decision_of_an_older_transaction_does_not_protect_a_newer_one(
    producer_id: int, epoch: int
) -> None:
    # The decided transaction ended (committed); the open one on the same id is another one,
    # as KafkaCommitter.recover sees it too.
    decided = {("orders-0", producer_id, epoch): 1}
    plan = plan_abort({"orders-0": ongoing("orders-0", 7, 3)}, decided)
    assert plan[0].verdict == Verdict.ABORT


def test_plan_skips_ended_and_unknown_ids() -> None:
    ended = replace(ongoing("orders-0"), state=TxnState.COMPLETE_COMMIT)
    plan = plan_abort({"orders-0": ended, "typo-0": None}, None)
    assert [c.verdict for c in plan] == [Verdict.NOT_OPEN, Verdict.NOT_OPEN]


def test_the_committable_names_the_described_transaction() -> None:
    (candidate,) = plan_abort({"orders-0": ongoing("orders-0", 7, 3)}, None)
    described = ongoing("orders-0", 7, 3)
    assert candidate.committable() == Committable(
        "orders-0", 7, 3, 0, (("out", 0), ("out", 1)), described.start_time_ms
    )


def test_open_transactions_keep_only_the_ids_the_prefix_names() -> None:
    admin = FakeAdmin(
        [ongoing("orders-0"), ongoing("orders-12"), ongoing("orders-x-1"), ongoing("ordersx-1")]
    )
    found = open_transactions(admin, "orders")
    assert [d.transactional_id for d in found] == ["orders-0", "orders-12"]


def test_open_transactions_without_prefix_list_every_ongoing_one() -> None:
    done = replace(ongoing("b-0"), state=TxnState.COMPLETE_ABORT)
    admin = FakeAdmin([ongoing("a-0"), done, ongoing("other")])
    assert [d.transactional_id for d in open_transactions(admin)] == ["a-0", "other"]
    every = open_transactions(admin, all_states=True)
    assert [d.transactional_id for d in every] == ["a-0", "b-0", "other"]


def test_decided_transactions_are_those_of_unconfirmed_decisions(checkpoint_location) -> None:
    location = checkpoint_location([Committable("orders-1", 8, 4, 10)])
    assert decided_transactions(location) == {("orders-1", 8, 4): 1}
    assert decided_transactions(location + "/") == {("orders-1", 8, 4): 1}


def test_confirmed_decisions_protect_nothing(checkpoint_location) -> None:
    location = checkpoint_location([Committable("orders-1", 8, 4, 10)], confirm=True)
    assert decided_transactions(location) == {}


def test_a_location_without_decisions_is_refused(tmp_path) -> None:
    # A mistyped path must not look like a sink that decided nothing.
    with pytest.raises(LingeringTransactionError) as error:
        decided_transactions(str(tmp_path / "chekpoint"))
    message = str(error.value)
    assert "--checkpoint-location" in message and "kafka-eos-sink" in message
    assert "--yes" in message


def test_abort_lingering_aborts_only_abort_verdicts_and_reports_each() -> None:
    admin = FakeAdmin([ongoing("orders-0", 7, 3), ongoing("orders-1", 8, 4)])
    committer = FakeCommitter(admin)
    plan = plan_abort(admin.describe(["orders-0", "orders-1"]), {("orders-1", 8, 4): 2})
    outcomes = abort_lingering(committer, plan)
    assert [c.transactional_id for c in committer.aborted] == ["orders-0"]
    (outcome,) = outcomes
    assert outcome.failure is None and outcome.now is not None
    assert outcome.now.state == TxnState.COMPLETE_ABORT


@pytest.mark.parametrize(
    "error",
    [
        Errors.TransactionalIdAuthorizationFailedError("EndTxn(abort) of orders-0 failed"),
        DeadlineExceeded("EndTxn(abort) of orders-0 did not finish within 30 s"),
        AbortMarkerSkippedError(
            Reason.LEADER_OFFLINE,
            "its leader or coordinator did not answer before the deadline",
            waits=True,
            transactional_id="orders-0",
            partitions=[("out", 0)],
            start_offset=None,
        ),
    ],
    ids=["refused", "timed out", "ABORT marker skipped"],
)
def test_one_failed_abort_does_not_stop_the_others(error: Exception) -> None:
    admin = FakeAdmin([ongoing("orders-0"), ongoing("orders-1")])
    committer = FakeCommitter(admin, fail={"orders-0": error})
    plan = plan_abort(admin.describe(["orders-0", "orders-1"]), None)
    outcomes = abort_lingering(committer, plan)
    assert [o.failure for o in outcomes] == [str(error), None]
    assert [c.transactional_id for c in committer.aborted] == ["orders-1"]


def test_a_transaction_still_open_after_the_abort_is_a_failure() -> None:
    (candidate,) = plan_abort({"orders-0": ongoing("orders-0")}, None)
    assert AbortOutcome(candidate, None, ongoing("orders-0")).failure == (
        "still Ongoing at its epoch after the fence"
    )
    # A new transaction of a live producer on the same id (other epoch) is not ours.
    assert AbortOutcome(candidate, None, ongoing("orders-0", epoch=9)).failure is None


def test_abort_report_codes_every_result() -> None:
    described = {
        "a-0": ongoing("a-0", 1, 0),
        "a-1": ongoing("a-1", 2, 0),
        "a-2": ongoing("a-2", 3, 0),
        "a-3": None,
    }
    plan = plan_abort(described, {("a-1", 2, 0): 5})
    failed = AbortOutcome(plan[0], "[Error 53] TransactionalIdAuthorizationFailedError", None)
    aborted = AbortOutcome(plan[2], None, replace(ongoing("a-2", 3, 1), start_time_ms=-1))
    report = abort_report(plan, [failed, aborted], dry_run=False, decisions_checked=True)
    assert [(e["transactional_id"], e["result"]) for e in report["transactions"]] == [
        ("a-0", "abort-failed"),
        ("a-1", "refused-decided"),
        ("a-2", "aborted"),
        ("a-3", "not-open"),
    ]
    assert report["transactions"][1]["decided_in"] == 5
    assert report["transactions"][3]["before"] is None
    assert report["summary"] == {
        "aborted": 1,
        "abort-failed": 1,
        "would-abort": 0,
        "refused-decided": 1,
        "not-open": 1,
    }


def test_a_dry_run_reports_would_abort() -> None:
    plan = plan_abort({"a-0": ongoing("a-0")}, None)
    report = abort_report(plan, [], dry_run=True, decisions_checked=False)
    assert report["transactions"][0]["result"] == Result.WOULD_ABORT
    assert report["transactions"][0]["error"] is None


def test_txn_dict_has_the_age_and_no_start_once_ended() -> None:
    txn = txn_dict(ongoing("a-0", age_s=90), now_ms=NOW_MS)
    assert txn["age_s"] == 90.0 and txn["start_time_ms"] == NOW_MS - 90_000
    assert txn["partitions"] == [{"topic": "out", "partition": 0}, {"topic": "out", "partition": 1}]
    ended = txn_dict(replace(ongoing("a-0"), state=TxnState.EMPTY, start_time_ms=-1), NOW_MS)
    assert (ended["start_time_ms"], ended["age_s"], ended["state"]) == (None, None, "Empty")
