"""``kafka-eos txn``: list and abort lingering Kafka transactions.

Only composes :mod:`connectors.kafka.lingering`: parse the options, call, print. Exit codes:
0 done, 1 a transaction was refused (decided) or its abort failed, 2 usage or cluster errors.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from contextlib import closing, contextmanager

import click
from rich.table import Table

from checkpoint.errors import KafkaEosError
from connectors.kafka.committer import KafkaCommitter
from connectors.kafka.lingering import (
    AbortOutcome,
    AbortReportDict,
    PartitionDict,
    Result,
    TxnDict,
    TxnListDict,
    Verdict,
    abort_lingering,
    abort_report,
    decided_transactions,
    plan_abort,
    reaching,
    txn_dict,
)
from connectors.kafka.transactions import open_transactions
from connectors.lint.inputs import format_duration
from kafka_eos.commands._cluster import client_options, cluster_options, console, failure

_UNDECIDABLE_WARNING = (
    "WARNING: without --checkpoint-location a transaction the sink already decided to commit "
    "looks like any lingering one, and aborting it loses its records. Stop the query first, "
    "and pass its checkpointLocation when you have it."
)
_RESULT_TEXT = {
    Result.ABORTED: "aborted",
    Result.ABORT_FAILED: "ABORT FAILED",
    Result.WOULD_ABORT: "would abort",
    Result.REFUSED: "REFUSED: decided",
    Result.NOT_OPEN: "not open",
}

_timeout_option = click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=30.0,
    show_default=True,
    help="Seconds allowed per request and per EndTxn (with its retries).",
)
_json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")


@click.group("txn")
def command() -> None:
    """List and abort lingering Kafka transactions (they hold back read_committed readers)."""


@command.command("list")
@cluster_options
@click.option(
    "--prefix", help="Only the ids <prefix>-<n> of the sink with this transactionalIdPrefix."
)
@click.option("--all-states", is_flag=True, help="Also ended ones (Empty, CompleteCommit, ...).")
@_json_option
@_timeout_option
def list_command(
    bootstrap_servers: str,
    kafka_options: tuple[str, ...],
    prefix: str | None,
    all_states: bool,
    as_json: bool,
    timeout: float,
) -> None:
    """List Ongoing transactions: the ones that hold back read_committed readers (LSO)."""
    options = client_options(kafka_options)
    with (
        _committer(bootstrap_servers, options, timeout) as committer,
        reaching(bootstrap_servers, "listing transactions"),
    ):
        described = open_transactions(committer.admin, prefix, all_states=all_states)
    found = [txn_dict(d) for d in described]
    if as_json:
        listing: TxnListDict = {"version": 1, "transactions": found}
        click.echo(json.dumps(listing, indent=2))
        return
    if not found:
        scope = f" of prefix {prefix!r}" if prefix else ""
        click.echo(f"no {'' if all_states else 'Ongoing '}transactions{scope}")
        return
    table = _txn_table()
    for txn in found:
        table.add_row(*_txn_cells(txn))
    console().print(table)


@command.command("abort")
@cluster_options
@click.option("--prefix", help="Abort the Ongoing transactions of this transactionalIdPrefix.")
@click.option(
    "--transactional-id",
    "transactional_ids",
    multiple=True,
    help="Abort this transactional id's Ongoing transaction (repeatable).",
)
@click.option(
    "--checkpoint-location",
    help="The query's checkpointLocation: transactions its sink decided to commit are refused.",
)
@click.option("--dry-run", is_flag=True, help="Show what would be aborted; abort nothing.")
@click.option("--yes", is_flag=True, help="Do not ask, even without --checkpoint-location.")
@_json_option
@_timeout_option
def abort_command(
    bootstrap_servers: str,
    kafka_options: tuple[str, ...],
    prefix: str | None,
    transactional_ids: tuple[str, ...],
    checkpoint_location: str | None,
    dry_run: bool,
    yes: bool,
    as_json: bool,
    timeout: float,
) -> None:
    """Abort lingering Ongoing transactions, never one the sink decided to commit."""
    if bool(prefix) == bool(transactional_ids):
        raise click.UsageError("give either --prefix or --transactional-id (repeatable)")
    ask = checkpoint_location is None and not (yes or dry_run)
    if ask and as_json:
        raise click.UsageError("--json cannot ask for confirmation: add --yes")
    options = client_options(kafka_options)
    if checkpoint_location is None:
        click.echo(_UNDECIDABLE_WARNING, err=True)
    with _committer(bootstrap_servers, options, timeout) as committer:
        with reaching(bootstrap_servers, "describing transactions"):
            described = (
                {d.transactional_id: d for d in open_transactions(committer.admin, prefix)}
                if prefix
                else committer.admin.describe(transactional_ids)
            )
        # Read after the describe, so a decision naming a described transaction is seen if it
        # was written before this point. Later ones cannot be: stop the query first.
        decided = decided_transactions(checkpoint_location) if checkpoint_location else None
        plan = plan_abort(described, decided)
        if not as_json:
            _print_plan(abort_report(plan, [], dry_run=True, decisions_checked=decided is not None))
        outcomes: list[AbortOutcome] = []
        if not dry_run and any(c.verdict == Verdict.ABORT for c in plan):
            if ask:
                click.confirm("Abort the transactions marked 'would abort'?", abort=True)
            with reaching(bootstrap_servers, "aborting transactions"):
                outcomes = abort_lingering(committer, plan)
    report = abort_report(plan, outcomes, dry_run=dry_run, decisions_checked=decided is not None)
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        _print_outcome(report, checkpoint_location)
    summary = report["summary"]
    if summary[Result.REFUSED] or summary[Result.ABORT_FAILED]:
        click.get_current_context().exit(1)


@contextmanager
def _committer(
    bootstrap_servers: str, options: dict[str, str], timeout: float
) -> Iterator[KafkaCommitter]:
    """The committer (and its admin) for the cluster; expected failures become exit 2."""
    config = {
        "bootstrap.servers": bootstrap_servers,
        "request.timeout.ms": str(int(timeout * 1000)),
        **options,
    }
    # The prefix only matters to the committer's recovery, which these commands never run.
    try:
        with closing(KafkaCommitter(config, prefix="", timeout_s=timeout)) as committer:
            yield committer
    except KafkaEosError as exc:
        raise failure(exc, options) from None


def _txn_table(*extra: str) -> Table:
    table = Table(box=None, pad_edge=False)
    for column in ("transactional id", "state", "producer id", "epoch", "age", "timeout"):
        table.add_column(column, no_wrap=True)
    table.add_column("partitions")
    for column in extra:
        table.add_column(column)
    return table


def _txn_cells(txn: TxnDict) -> list[str]:
    age = txn["age_s"]
    return [
        txn["transactional_id"],
        txn["state"],
        str(txn["producer_id"]),
        str(txn["epoch"]),
        "-" if age is None else "<1s" if age < 1 else format_duration(int(age) * 1000),
        format_duration(txn["timeout_ms"]),
        _partitions(txn["partitions"]),
    ]


def _partitions(partitions: list[PartitionDict]) -> str:
    """``[out/0, out/1, dlq/0]`` -> ``out[0,1] dlq[0]``."""
    by_topic: dict[str, list[int]] = defaultdict(list)
    for tp in partitions:
        by_topic[tp["topic"]].append(tp["partition"])
    return " ".join(f"{t}[{','.join(map(str, ps))}]" for t, ps in by_topic.items()) or "-"


def _print_plan(plan: AbortReportDict) -> None:
    """The plan, before anything is aborted, so a confirmation prompt follows it."""
    if not plan["transactions"]:
        click.echo("no Ongoing transactions to abort")
        return
    table = _txn_table("verdict")
    for entry in plan["transactions"]:
        before = entry["before"]
        cells = (
            [entry["transactional_id"], "unknown id", *["-"] * 5]
            if before is None
            else _txn_cells(before)
        )
        table.add_row(*cells, _RESULT_TEXT[Result(entry["result"])])
    console().print(table)


def _print_outcome(report: AbortReportDict, checkpoint_location: str | None) -> None:
    for entry in report["transactions"]:
        tid, result = entry["transactional_id"], Result(entry["result"])
        if result == Result.REFUSED:
            click.echo(
                f"REFUSED {tid}: the sink decided to commit it (decision {entry['decided_in']} "
                f"in --checkpoint-location {checkpoint_location!r} is not confirmed yet); "
                "aborting it would lose its records. Restart the query instead: its recovery "
                "commits it.",
                err=True,
            )
        elif result == Result.ABORT_FAILED:
            click.echo(f"ABORT FAILED {tid}: {entry['error']}", err=True)
        elif result == Result.ABORTED:
            after = entry["after"]
            click.echo(f"aborted {tid} (now {after['state'] if after else 'unknown id'})")
    counts = ", ".join(f"{n} {code}" for code, n in report["summary"].items() if n)
    if counts:
        click.echo(("dry run: " if report["dry_run"] else "") + counts)
