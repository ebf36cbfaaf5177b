"""``kafka-eos txn list`` and ``txn abort`` through click's runner, on an in-memory cluster."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any

import kafka.errors as Errors
import pytest
from cli_fakes import FakeAdmin, FakeCommitter, ongoing
from click.testing import Result

from checkpoint.errors import DeadlineExceeded
from checkpoint.model import Committable
from connectors.kafka.sink.naming import OwnedId
from connectors.kafka.sink.owners import Entry, Registration, Unknown
from connectors.kafka.txn_state import TxnState
from kafka_eos.commands import txn

BOOTSTRAP = ("--bootstrap-servers", "broker:9092")


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeCommitter:
    """The committer the commands get; ``cluster.configs`` holds the configs they passed."""
    now_ms = int(time.time() * 1000)  # the listing shows ages on the real clock
    committer = FakeCommitter(
        FakeAdmin([ongoing("orders-0", 7, 3, now_ms=now_ms), ongoing("orders-1", 8, 4)])
    )
    committer.configs = []  # type: ignore[attr-defined]

    def build(config: dict[str, Any], timeout_s: float) -> FakeCommitter:
        committer.configs.append((config, timeout_s))  # type: ignore[attr-defined]
        return committer

    monkeypatch.setattr(txn, "KafkaCommitter", build)
    return committer


@pytest.fixture
def run(invoke: Callable[..., Result]) -> Callable[..., Result]:
    return lambda *args, input=None: invoke(txn.command, *args, input=input)


def test_list_shows_ongoing_transactions_as_a_table(run, cluster) -> None:
    result = run("list", *BOOTSTRAP)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split()[:3] == ["transactional", "id", "state"]
    assert lines[1].split()[:4] == ["orders-0", "Ongoing", "7", "3"]
    assert re.search(r" 1m3\ds +1m +out\[0,1\]", lines[1]), lines[1]


def test_list_json_and_client_options(run, cluster) -> None:
    result = run("list", *BOOTSTRAP, "--json", "--timeout", "5", "-X", "security.protocol=SASL_SSL")
    assert result.exit_code == 0, result.output
    listing = json.loads(result.stdout)
    assert listing["version"] == 1
    assert [t["transactional_id"] for t in listing["transactions"]] == ["orders-0", "orders-1"]
    assert listing["transactions"][0]["partitions"][1] == {"topic": "out", "partition": 1}
    config, timeout_s = cluster.configs[0]
    assert config == {
        "bootstrap.servers": "broker:9092",
        "request.timeout.ms": "5000",
        "security.protocol": "SASL_SSL",
    }
    assert timeout_s == 5.0 and cluster.closed


def test_list_by_prefix_with_nothing_open(run, cluster) -> None:
    result = run("list", *BOOTSTRAP, "--prefix", "payments")
    assert result.exit_code == 0
    assert result.stdout == "no Ongoing transactions of prefix 'payments'\n"


def test_abort_needs_exactly_one_selector(run, cluster) -> None:
    for args in ((), ("--prefix", "orders", "--transactional-id", "orders-0")):
        result = run("abort", *BOOTSTRAP, "--yes", *args)
        assert result.exit_code == 2
        assert "--prefix or --transactional-id" in result.stderr
    assert cluster.aborted == []


def test_abort_without_decisions_warns_and_asks(run, cluster) -> None:
    result = run("abort", *BOOTSTRAP, "--prefix", "orders", input="n\n")
    assert result.exit_code == 1
    assert "without --checkpoint-location" in result.stderr
    assert "would abort" in result.stdout
    assert cluster.aborted == []

    result = run("abort", *BOOTSTRAP, "--prefix", "orders", input="y\n")
    assert result.exit_code == 0, result.output
    assert [c.transactional_id for c in cluster.aborted] == ["orders-0", "orders-1"]
    assert "aborted orders-0 (now CompleteAbort)" in result.stdout


def test_json_abort_cannot_prompt(run, cluster) -> None:
    result = run("abort", *BOOTSTRAP, "--prefix", "orders", "--json")
    assert result.exit_code == 2 and result.stderr == ""
    error = json.loads(result.stdout)["error"]
    assert error["code"] is None and "--yes" in error["message"]  # a usage error: no code
    assert cluster.aborted == []


def test_abort_refuses_a_decided_transaction(run, cluster, checkpoint_location) -> None:
    location = checkpoint_location([Committable("orders-1", 8, 4, 100)])
    result = run("abort", *BOOTSTRAP, "--prefix", "orders", "--checkpoint-location", location)
    assert result.exit_code == 1
    assert [c.transactional_id for c in cluster.aborted] == ["orders-0"]
    assert cluster.admin.transactions["orders-1"].state == TxnState.ONGOING
    assert "REFUSED orders-1" in result.stderr and "decision 1" in result.stderr
    assert "Restart the query" in result.stderr
    assert "without --checkpoint-location" not in result.stderr


def test_abort_json_report(run, cluster, checkpoint_location) -> None:
    location = checkpoint_location([Committable("orders-1", 8, 4, 100)])
    result = run(
        "abort",
        *BOOTSTRAP,
        "--transactional-id",
        "orders-1",
        "--transactional-id",
        "orders-0",
        "--transactional-id",
        "typo-0",
        "--checkpoint-location",
        location,
        "--json",
    )
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["decisions_checked"] is True and report["dry_run"] is False
    assert [(e["transactional_id"], e["result"]) for e in report["transactions"]] == [
        ("orders-0", "aborted"),
        ("orders-1", "refused-decided"),
        ("typo-0", "not-open"),
    ]
    assert report["transactions"][0]["after"]["state"] == "CompleteAbort"


def test_dry_run_aborts_nothing(run, cluster) -> None:
    result = run("abort", *BOOTSTRAP, "--prefix", "orders", "--dry-run")
    assert result.exit_code == 0
    assert cluster.aborted == []
    assert result.stdout.splitlines()[-1] == "dry run: 2 would-abort"


def test_a_failed_abort_exits_one_and_names_the_error(run, cluster) -> None:
    cluster.fail["orders-0"] = Errors.TransactionalIdAuthorizationFailedError(
        "EndTxn(abort) of orders-0 failed"
    )
    result = run("abort", *BOOTSTRAP, "--prefix", "orders", "--yes")
    assert result.exit_code == 1
    assert "ABORT FAILED orders-0: [Error 53] TransactionalIdAuthorizationFailedError" in (
        result.stderr
    )
    assert [c.transactional_id for c in cluster.aborted] == ["orders-1"]


def test_a_checkpoint_location_without_decisions_is_a_usage_error(run, cluster, tmp_path) -> None:
    result = run("abort", *BOOTSTRAP, "--prefix", "orders", "--checkpoint-location", str(tmp_path))
    assert result.exit_code == 2
    assert "no kafka-eos sink decisions" in result.stderr
    assert cluster.aborted == []


class _Unreachable(FakeCommitter):
    @property
    def admin(self) -> FakeAdmin:
        # What TransactionAdmin raises when no bootstrap server answers.
        raise DeadlineExceeded("no broker of bootstrap.servers = broker:9092 answered")

    @admin.setter
    def admin(self, value: FakeAdmin) -> None:
        pass


def test_an_unreachable_cluster_is_one_line_without_traceback(run, monkeypatch) -> None:
    monkeypatch.setattr(txn, "KafkaCommitter", lambda *a, **k: _Unreachable(FakeAdmin()))
    result = run("list", *BOOTSTRAP, "-X", "sasl.password=hunter2")
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith(
        "Error: [KAFKA_EOS.OPERATIONS.TXN_READ_FAILED] listing transactions on "
        "--bootstrap-servers 'broker:9092'"
    )
    assert "no broker of bootstrap.servers" in line and "-X" in line and "Traceback" not in line


def test_under_json_a_failure_is_a_json_document_on_stdout(run, monkeypatch) -> None:
    """A script that reads --json output gets the failure there too, with its code apart,
    the exit code unchanged, and no secret."""
    monkeypatch.setattr(txn, "KafkaCommitter", lambda *a, **k: _Unreachable(FakeAdmin()))
    result = run("list", *BOOTSTRAP, "-X", "sasl.password=hunter2", "--json")
    assert result.exit_code == 2 and result.stderr == ""
    report = json.loads(result.stdout)
    assert report["version"] == 1
    assert report["error"]["code"] == "KAFKA_EOS.OPERATIONS.TXN_READ_FAILED"
    assert report["error"]["message"].startswith("listing transactions on --bootstrap-servers")
    assert "hunter2" not in result.stdout


def test_a_malformed_client_option_names_its_position(run, cluster) -> None:
    result = run("list", *BOOTSTRAP, "-X", "sasl.password:hunter2")
    assert result.exit_code == 2
    assert "kafka option #1: expected KEY=VALUE" in result.stderr
    assert "hunter2" not in result.stderr


def test_errors_never_echo_a_secret(run, monkeypatch) -> None:
    class Leaky(FakeCommitter):
        @property
        def admin(self) -> FakeAdmin:
            raise Errors.KafkaConnectionError("auth failed for password hunter2")

        @admin.setter
        def admin(self, value: FakeAdmin) -> None:
            pass

    monkeypatch.setattr(txn, "KafkaCommitter", lambda *a, **k: Leaky(FakeAdmin()))
    result = run("list", *BOOTSTRAP, "-X", "sasl.password=hunter2")
    assert result.exit_code == 2
    assert "hunter2" not in result.stderr and "***" in result.stderr


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> Callable[[int], None]:
    """The owner registry answers that the query of the ids registered ``minutes`` ago."""

    def answer(minutes: int) -> None:
        at = int(time.time() * 1000) - minutes * 60_000

        def locate(admin: object, cluster: str, ids: Any) -> dict[OwnedId, Entry]:
            return {OwnedId("orders", "0a1b2c3d"): Registration("s3a://b/chk/orders", at)}

        monkeypatch.setattr(txn, "locate_queries", locate)

    return answer


def test_aborting_the_transactions_of_a_query_registered_within_the_hour_warns_and_asks(
    run, cluster, checkpoint_location, registered
) -> None:
    """A running query registers its location at most hourly: aborting its transactions fails
    its batch, and one it decides after this command read its decisions is lost. Every path
    warns and asks then, even with --checkpoint-location, which alone does not ask."""
    registered(10)
    location = checkpoint_location([Committable("other-0", 1, 1, 1)])
    args = ("abort", *BOOTSTRAP, "--prefix", "orders", "--checkpoint-location", location)
    refused = run(*args, input="n\n")
    assert refused.exit_code == 1 and cluster.aborted == []
    assert "WARNING: the query of prefix 'orders', owner 0a1b2c3d" in refused.stderr
    assert "registered 10 min ago" in refused.stderr and "Stop the query first" in refused.stderr
    assert run(*args, "--json").exit_code == 2 and cluster.aborted == []
    confirmed = run(*args, "--yes")
    assert confirmed.exit_code == 0, confirmed.output
    assert "WARNING: the query of prefix 'orders'" in confirmed.stderr  # said, even with --yes
    assert [c.transactional_id for c in cluster.aborted] == ["orders-0", "orders-1"]


def test_a_query_that_registered_long_ago_is_not_taken_for_a_running_one(
    run, cluster, checkpoint_location, registered
) -> None:
    registered(120)
    location = checkpoint_location([Committable("other-0", 1, 1, 1)])
    result = run("abort", *BOOTSTRAP, "--prefix", "orders", "--checkpoint-location", location)
    assert result.exit_code == 0, result.output
    assert "WARNING" not in result.stderr
    assert [c.transactional_id for c in cluster.aborted] == ["orders-0", "orders-1"]


def test_a_query_whose_registration_cannot_be_read_is_not_taken_for_a_stopped_one(
    run, cluster, checkpoint_location, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without READ on the owner registry's group (or a release before it), nothing says the
    query stopped: the command warns and asks as for a running one."""
    unknown = Unknown("GroupAuthorizationFailedError reading its consumer group")
    monkeypatch.setattr(
        txn, "locate_queries", lambda *args: {OwnedId("orders", "0a1b2c3d"): unknown}
    )
    location = checkpoint_location([Committable("other-0", 1, 1, 1)])
    args = ("abort", *BOOTSTRAP, "--prefix", "orders", "--checkpoint-location", location)
    refused = run(*args, input="n\n")
    assert refused.exit_code == 1 and cluster.aborted == []
    assert "cannot tell whether it runs (GroupAuthorizationFailedError" in refused.stderr
