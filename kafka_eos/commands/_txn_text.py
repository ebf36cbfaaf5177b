"""Text output of ``kafka-eos txn``: tables and messages built from the JSON-ready reports of
:mod:`kafka_eos.operations.lingering` and :mod:`kafka_eos.operations.resolve`."""

from __future__ import annotations

import shlex
from collections import defaultdict

import click
from rich.table import Table

from connectors.options import format_duration
from kafka_eos.commands._cluster import console
from kafka_eos.operations.lingering import (
    AbortReportDict,
    PartitionDict,
    QueryDict,
    Result,
    TxnDict,
)
from kafka_eos.operations.resolve import ResolveReportDict, Standing

RESULT_TEXT = {
    Result.ABORTED: "aborted",
    Result.ABORT_FAILED: "ABORT FAILED",
    Result.WOULD_ABORT: "would abort",
    Result.REFUSED: "REFUSED: decided",
    Result.NOT_OPEN: "not open",
}


def txn_table(*extra: str) -> Table:
    table = Table(box=None, pad_edge=False)
    for column in ("transactional id", "state", "producer id", "epoch", "age", "timeout"):
        table.add_column(column, no_wrap=True)
    table.add_column("partitions")
    for column in extra:
        table.add_column(column)
    return table


def txn_cells(txn: TxnDict) -> list[str]:
    age = txn["age_s"]
    return [
        txn["transactional_id"],
        txn["state"],
        str(txn["producer_id"]),
        str(txn["epoch"]),
        "-" if age is None else "<1s" if age < 1 else format_duration(int(age) * 1000),
        format_duration(txn["timeout_ms"]),
        partitions_text(txn["partitions"]),
    ]


def query_text(query: QueryDict | None) -> str:
    """Where the query that named an id checkpoints: ``-`` for ids of other clients."""
    if query is None:
        return "-"
    if query["checkpoint_location"] is None:
        return f"owner {query['owner']}: location unknown (see --json)"
    return query["checkpoint_location"]


def partitions_text(partitions: list[PartitionDict]) -> str:
    """``[out/0, out/1, dlq/0]`` -> ``out[0,1] dlq[0]``."""
    by_topic: dict[str, list[int]] = defaultdict(list)
    for tp in partitions:
        by_topic[tp["topic"]].append(tp["partition"])
    return " ".join(f"{t}[{','.join(map(str, ps))}]" for t, ps in by_topic.items()) or "-"


def print_plan(plan: AbortReportDict) -> None:
    """The plan, before anything is aborted, so a confirmation prompt follows it."""
    if not plan["transactions"]:
        click.echo("no Ongoing transactions to abort")
        return
    table = txn_table("verdict")
    for entry in plan["transactions"]:
        before = entry["before"]
        cells = (
            [entry["transactional_id"], "unknown id", *["-"] * 5]
            if before is None
            else txn_cells(before)
        )
        table.add_row(*cells, RESULT_TEXT[Result(entry["result"])])
    console().print(table)


def print_outcome(report: AbortReportDict, checkpoint_location: str | None) -> None:
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


def print_resolve(report: ResolveReportDict) -> None:
    """Each batch with its transactions as decided, as they are now, and their verdict; then
    the confirmation that ``--accept-loss`` wrote, if any."""
    if not report["batches"]:
        click.echo("no decided batch is unconfirmed: nothing is stuck")
    accepted = report["accepted"]
    for batch in report["batches"]:
        counts = ", ".join(f"{n} {code}" for code, n in batch["summary"].items() if n)
        now = (
            "confirmed now" if accepted and accepted["batch"] == batch["batch"] else "not confirmed"
        )
        click.echo(f"batch {batch['batch']}, decided, {now}: {counts or 'nothing written'}")
        table = Table(box=None, pad_edge=False)
        for column in ("transactional id", "producer id", "epoch", "records", "partitions"):
            table.add_column(column, no_wrap=True)
        table.add_column("now")
        table.add_column("verdict")
        for txn in batch["transactions"]:
            decided, now, verdict = txn["decided"], txn["now"], txn["verdict"]
            table.add_row(
                decided["transactional_id"],
                str(decided["producer_id"]),
                str(decided["epoch"]),
                str(decided["record_count"]),
                partitions_text(decided["partitions"]),
                "unknown id"
                if now is None
                else f"{now['state']}, producer id {now['producer_id']}, epoch {now['epoch']}",
                verdict.upper() if verdict == Standing.LOST else verdict,
            )
        console().print(table)
    if accepted is not None:
        lost = accepted["lost"]
        click.echo(
            f"batch {accepted['batch']} confirmed: the loss of "
            f"{', '.join(t['transactional_id'] for t in lost)} "
            f"({sum(t['record_count'] for t in lost)} records) is accepted by "
            f"{accepted['accepted_by']}, because: {accepted['reason']}\n"
            "Restart the query: its recovery skips this batch. To recover the lost records, "
            "re-process their input outside the query, against what the output already holds."
        )


def print_way_forward(
    report: ResolveReportDict, checkpoint_location: str, bootstrap_servers: str
) -> None:
    """For each batch: the command that accepts exactly its loss, or that a restart of the
    query resolves it."""
    for batch in report["batches"]:
        lost = [t for t in batch["transactions"] if t["verdict"] == Standing.LOST]
        if not lost:
            click.echo(
                f"batch {batch['batch']} lost nothing: restart the query; its recovery commits "
                "the committable transactions and confirms the batch",
                err=True,
            )
            continue
        ids = ", ".join(t["decided"]["transactional_id"] for t in lost)
        click.echo(
            f"batch {batch['batch']}: {ids} will never commit, and every restart of the query "
            "stops on it (TransactionLostError). Accept the loss of exactly these, then restart "
            "the query:\n  kafka-eos txn resolve --checkpoint-location "
            f"{shlex.quote(checkpoint_location)} --bootstrap-servers "
            f"{shlex.quote(bootstrap_servers)} --batch {batch['batch']} --accept-loss "
            '--reason "..."',
            err=True,
        )
