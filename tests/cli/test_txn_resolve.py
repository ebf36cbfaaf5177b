"""``kafka-eos txn resolve``: a decided batch that can no longer commit, shown and, with
``--accept-loss``, confirmed with its loss on record. In-memory cluster, real store."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from cli_fakes import NOW_MS, FakeAdmin, FakeCommitter, ongoing
from click.testing import Result

from checkpoint.model import Committable, Snapshot
from checkpoint.store import SnapshotStore
from connectors.kafka.sink.errors import TransactionLostError
from connectors.kafka.txn_state import TxnState
from kafka_eos.commands import txn

BOOTSTRAP = ("--bootstrap-servers", "broker:9092")
# Began 90 s before NOW_MS: the start time the fake coordinator shows for each (cli_fakes).
STARTED = NOW_MS - 90_000
COMMITTED = Committable("orders-0", 7, 3, 100, (("out", 0),), STARTED)
COMMITTABLE = Committable("orders-1", 8, 4, 200, (("out", 1),), STARTED)
LOST = Committable("orders-2", 9, 5, 300, (("out", 2),), STARTED)
NOTHING_WRITTEN = Committable.nothing_written("orders-3")
ACCEPT = ("--accept-loss", "--reason", "INC-42: replayed by hand")


def state(committable: Committable, state: TxnState, epoch_step: int = 0):
    now = ongoing(committable.transactional_id, committable.producer_id, committable.epoch)
    return replace(now, state=state, epoch=committable.epoch + epoch_step)


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeCommitter:
    """orders-0 committed, orders-1 still Ongoing as decided, orders-2 aborted by the broker
    on its timeout (which bumps the epoch). Transactions V1."""
    committer = FakeCommitter(
        FakeAdmin(
            [
                state(COMMITTED, TxnState.COMPLETE_COMMIT),
                state(COMMITTABLE, TxnState.ONGOING),
                state(LOST, TxnState.COMPLETE_ABORT, epoch_step=1),
            ]
        )
    )
    monkeypatch.setattr(txn, "KafkaCommitter", lambda *args, **kwargs: committer)
    return committer


@pytest.fixture
def stuck(checkpoint_location: Callable[..., str]) -> str:
    """Batch 1 decided with the three transactions (and a task that wrote nothing)."""
    return checkpoint_location([COMMITTED, COMMITTABLE, LOST, NOTHING_WRITTEN])


@pytest.fixture
def run(invoke: Callable[..., Result]) -> Callable[..., Result]:
    return lambda *args, input=None: invoke(txn.command, "resolve", *BOOTSTRAP, *args, input=input)


def store_of(location: str) -> SnapshotStore:
    return SnapshotStore(Path(location) / "kafka-eos-sink")


def test_resolve_shows_each_transaction_and_the_way_forward(run, cluster, stuck) -> None:
    result = run("--checkpoint-location", stuck)
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "batch 1, decided, not confirmed: 1 committed, 1 committable, 1 lost"
    rows = {line.split()[0]: line.split() for line in lines[2:]}
    assert set(rows) == {"orders-0", "orders-1", "orders-2"}  # orders-3 opened no transaction
    assert rows["orders-0"][1:4] == ["7", "3", "100"] and rows["orders-0"][-1] == "committed"
    assert rows["orders-1"][-1] == "committable"
    assert rows["orders-2"][-1] == "LOST"
    assert "CompleteAbort, producer id 9, epoch 6" in result.stdout
    assert "batch 1: orders-2 will never commit: the broker aborted them" in result.stderr
    assert f"--checkpoint-location {stuck} --bootstrap-servers broker:9092 --batch 1" in (
        result.stderr
    )
    assert cluster.committed == [] and store_of(stuck).unconfirmed_ids() == [1]


def test_resolve_json(run, cluster, stuck) -> None:
    result = run("--checkpoint-location", stuck, "--json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["version"] == 2 and report["accepted"] is None
    [batch] = report["batches"]
    assert batch["summary"] == {"committed": 1, "committable": 1, "lost": 1, "undetermined": 0}
    lost = batch["transactions"][2]
    assert lost["verdict"] == "lost"
    assert lost["decided"] == {
        "transactional_id": "orders-2",
        "producer_id": 9,
        "epoch": 5,
        "record_count": 300,
        "partitions": [{"topic": "out", "partition": 2}],
    }
    assert (lost["now"]["state"], lost["now"]["epoch"]) == ("CompleteAbort", 6)


def test_nothing_stuck(run, cluster, checkpoint_location) -> None:
    location = checkpoint_location([COMMITTED], confirm=True)
    result = run("--checkpoint-location", location)
    assert result.exit_code == 0
    assert result.stdout == "no decided batch is unconfirmed: nothing is stuck\n"
    accepted = run("--checkpoint-location", location, *ACCEPT, "--yes")
    assert accepted.exit_code == 2 and "nothing is stuck" in accepted.stderr


def test_accept_loss_commits_the_committable_then_confirms_the_lost_one(
    run, cluster, stuck, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="kafka_eos.operations.resolve"):
        result = run("--checkpoint-location", stuck, *ACCEPT, "--yes")
    assert result.exit_code == 0, result.output
    assert cluster.committed == [COMMITTABLE]
    confirmation = store_of(stuck).confirmation(1)
    assert confirmation is not None and confirmation.accepted_loss is not None
    loss = confirmation.accepted_loss
    assert loss.lost == (LOST,) and loss.reason == "INC-42: replayed by hand"
    assert "@" in loss.accepted_by and confirmation.confirmed_at_ms is not None
    assert store_of(stuck).unconfirmed_ids() == []  # recovery skips it: the query goes on
    assert "batch 1 confirmed by" in result.stdout and "INC-42" in result.stdout
    assert "Lost: orders-2 (300 records)" in result.stdout
    assert "Restart the query" in result.stdout and "Undetermined" not in result.stdout
    [record] = caplog.records
    assert record.levelno == logging.WARNING and "orders-2" in record.getMessage()
    assert "INC-42" in record.getMessage()


def test_accept_loss_is_refused_when_the_coordinator_commits_the_lost_transaction(
    run, cluster, stuck
) -> None:
    """After a V2 epoch overflow the describe shows a new producer id, but the coordinator
    still answers a repeated EndTxn(commit) with success: the records are visible, and
    accepting their loss would make an operator re-produce them (duplicates)."""
    cluster.admin.hidden_commits.add(LOST.transactional_id)
    result = run("--checkpoint-location", stuck, *ACCEPT, "--yes")
    assert result.exit_code != 0, result.output
    assert "accepted EndTxn(commit) of ['orders-2']" in result.output
    assert store_of(stuck).confirmation(1) is None


def test_accept_loss_is_refused_without_a_definite_answer_from_the_coordinator(
    run, cluster, stuck
) -> None:
    cluster.admin.unanswered.add(LOST.transactional_id)
    result = run("--checkpoint-location", stuck, *ACCEPT, "--yes")
    assert result.exit_code != 0, result.output
    assert "no definite answer from the coordinators" in result.output
    assert store_of(stuck).confirmation(1) is None


def test_accept_loss_json_names_the_confirmation(run, cluster, stuck) -> None:
    result = run("--checkpoint-location", stuck, *ACCEPT, "--yes", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["accepted"]["batch"] == 1
    assert [t["transactional_id"] for t in report["accepted"]["lost"]] == ["orders-2"]
    assert report["accepted"]["undetermined"] == []
    assert report["batches"][0]["summary"] == {
        "committed": 2,
        "committable": 0,
        "lost": 1,
        "undetermined": 0,
    }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--accept-loss", "--yes"), "go together"),
        (("--accept-loss", "--reason", " ", "--yes"), "go together"),
        (("--reason", "why"), "go together"),
        (ACCEPT, "add --yes"),  # no terminal to answer the prompt
        ((*ACCEPT, "--json"), "add --yes"),
        ((*ACCEPT, "--yes", "--batch", "0"), "--batch 0 is not a decided, unconfirmed batch"),
        ((*ACCEPT, "--yes", "--batch", "7"), "(those are [1])"),
    ],
)
def test_accept_loss_refusals_exit_2_and_write_nothing(run, cluster, stuck, args, message):
    result = run("--checkpoint-location", stuck, *args)
    assert result.exit_code == 2, result.output
    # Under --json the refusal is the JSON document on stdout.
    said = json.loads(result.stdout)["error"]["message"] if "--json" in args else result.stderr
    assert message in said
    assert cluster.committed == [] and store_of(stuck).unconfirmed_ids() == [1]


def test_a_batch_that_lost_nothing_is_left_to_the_query(run, cluster, checkpoint_location):
    location = checkpoint_location([COMMITTED, COMMITTABLE])
    shown = run("--checkpoint-location", location)
    assert shown.exit_code == 0 and "1 committed, 1 committable" in shown.stdout
    result = run("--checkpoint-location", location, *ACCEPT, "--yes")
    assert result.exit_code == 2 and "no lost or undetermined transaction" in result.stderr
    assert "restart the query" in result.stderr and cluster.committed == []


def test_several_stuck_batches_need_batch(run, cluster, stuck) -> None:
    store_of(stuck).write(Snapshot(2, "orders", (replace(LOST, epoch=6),)))
    result = run("--checkpoint-location", stuck, *ACCEPT, "--yes")
    assert result.exit_code == 2 and "decided batches [1, 2] are unconfirmed" in result.stderr
    chosen = run("--checkpoint-location", stuck, *ACCEPT, "--yes", "--batch", "2")
    assert chosen.exit_code == 0, chosen.output
    assert store_of(stuck).unconfirmed_ids() == [1]


def test_the_prompt_shows_the_batch_and_a_no_writes_nothing(
    run, cluster, stuck, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(txn, "_interactive", lambda: True)
    refused = run("--checkpoint-location", stuck, *ACCEPT, input="n\n")
    assert refused.exit_code == 1
    assert "LOST" in refused.stdout and "Accept the loss of the LOST transactions" in refused.stdout
    assert cluster.committed == [] and store_of(stuck).unconfirmed_ids() == [1]
    accepted = run("--checkpoint-location", stuck, *ACCEPT, input="y\n")
    assert accepted.exit_code == 0, accepted.output
    assert store_of(stuck).unconfirmed_ids() == []


def test_a_transaction_lost_while_resolving_stops_before_the_confirmation(
    run, cluster, stuck
) -> None:
    """The operator accepted the loss they were shown, not a larger one."""
    commit = cluster.commit

    def commit_after_its_timeout(committable: Committable) -> None:
        # The broker aborts orders-1 on its timeout just before the EndTxn arrives.
        cluster.admin.transactions[committable.transactional_id] = state(
            committable, TxnState.COMPLETE_ABORT, epoch_step=1
        )
        commit(committable)  # raises TransactionLostError, as KafkaCommitter does

    cluster.commit = commit_after_its_timeout
    result = run("--checkpoint-location", stuck, *ACCEPT, "--yes")
    assert result.exit_code == 2, result.output
    assert "changed while it was resolved" in result.stderr
    assert "now lost: orders-1, orders-2" in result.stderr
    assert store_of(stuck).unconfirmed_ids() == [1]


def test_the_lost_error_points_to_resolve_and_not_to_a_checkpoint_reset() -> None:
    message = str(TransactionLostError("q-0", 4001, 7, "now CompleteAbort").in_batch(3))
    assert "kafka-eos txn resolve --checkpoint-location <checkpointLocation>" in message
    assert "--batch 3" in message and '--accept-loss --reason "..."' in message
    assert "then restart the query" in message
    assert "resetting" not in message and "Do not reset the query's checkpoint" in message


def test_an_undetermined_transaction_is_shown_as_such_and_accepted_apart_from_losses(
    run, cluster, checkpoint_location
) -> None:
    """A late attempt of the task took orders-2's id after the decision and aborted its own
    transaction: the coordinator shows that later transaction, not orders-2's. orders-2 may
    have committed, so resolve never calls it lost, never tells to re-process it, and an
    accepted loss records it as undetermined."""
    decided = replace(LOST, start_time_ms=1_000)
    later = replace(state(LOST, TxnState.COMPLETE_ABORT, epoch_step=2), start_time_ms=9_000)
    cluster.admin.transactions[LOST.transactional_id] = later
    location = checkpoint_location([COMMITTED, decided])
    shown = run("--checkpoint-location", location)
    assert shown.exit_code == 1, shown.output
    rows = {line.split()[0]: line.split() for line in shown.stdout.splitlines()[2:]}
    assert rows["orders-2"][-1] == "UNDETERMINED"
    assert "cannot be shown to have committed or aborted" in shown.stderr
    assert "do not re-process their input" in shown.stderr and "kafka-eos verify" in shown.stderr
    assert "will never commit" not in shown.stderr

    accepted = run("--checkpoint-location", location, *ACCEPT, "--yes", "--json")
    assert accepted.exit_code == 0, accepted.output
    report = json.loads(accepted.stdout)
    assert report["accepted"]["lost"] == []
    assert [t["transactional_id"] for t in report["accepted"]["undetermined"]] == ["orders-2"]
    loss = store_of(location).confirmation(1).accepted_loss
    assert loss is not None and (loss.lost, loss.undetermined) == ((), (decided,))
    text = run("--checkpoint-location", location)
    assert text.exit_code == 0  # confirmed: nothing stuck any more
