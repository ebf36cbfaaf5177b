"""Text output of ``kafka-eos txn``: tables and messages built from the JSON-ready reports of
:mod:`kafka_eos.operations.lingering`, :mod:`kafka_eos.operations.resolve` and
:mod:`kafka_eos.operations.hanging`."""

from __future__ import annotations

import shlex
from collections import defaultdict

import click
from rich.table import Table

from connectors.kafka.sink.outcome import UNCONFIRMABLE, Outcome
from connectors.options import format_duration
from kafka_eos.commands._cluster import console
from kafka_eos.operations.hanging import HangingReportDict
from kafka_eos.operations.lingering import (
    AbortReportDict,
    PartitionDict,
    QueryDict,
    Result,
    TxnDict,
)
from kafka_eos.operations.resolve import DecidedTxnDict, ResolveReportDict

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
                verdict.upper() if verdict in UNCONFIRMABLE else verdict,
            )
        console().print(table)
    if accepted is not None:
        lost, undetermined = accepted["lost"], accepted["undetermined"]
        click.echo(
            f"batch {accepted['batch']} confirmed by {accepted['accepted_by']}, because: "
            f"{accepted['reason']}. Restart the query: its recovery skips this batch."
        )
        if lost:
            click.echo(
                f"Lost: {_txn_ids(lost)} ({sum(t['record_count'] for t in lost)} records). To "
                "recover them, re-process their input outside the query, against what the "
                "output already holds (kafka-eos verify)."
            )
        if undetermined:
            click.echo(
                f"Undetermined: {_txn_ids(undetermined)} "
                f"({sum(t['record_count'] for t in undetermined)} records) may have committed. "
                "Do not re-process their input: `kafka-eos verify` shows which input has no "
                "result in the output; re-process only that."
            )


def print_way_forward(
    report: ResolveReportDict, checkpoint_location: str, bootstrap_servers: str
) -> None:
    """For each batch: the command that accepts exactly its loss, or that a restart of the
    query resolves it."""
    for batch in report["batches"]:
        verdicts = [t["verdict"] for t in batch["transactions"]]
        lost = [t["decided"] for t in batch["transactions"] if t["verdict"] == Outcome.LOST]
        undetermined = [
            t["decided"] for t in batch["transactions"] if t["verdict"] == Outcome.UNDETERMINED
        ]
        if not (lost or undetermined):
            click.echo(
                f"batch {batch['batch']} lost nothing: restart the query; its recovery commits "
                "the committable transactions and confirms the batch",
                err=True,
            )
            continue
        if lost:
            click.echo(
                f"batch {batch['batch']}: {_txn_ids(lost)} will never commit: the broker "
                "aborted them (TransactionLostError).",
                err=True,
            )
        if undetermined:
            click.echo(
                f"batch {batch['batch']}: {_txn_ids(undetermined)} cannot be shown to have "
                "committed or aborted: their ids moved on (CommitUndeterminedError). They may "
                "well be visible: do not re-process their input. Check the output first: "
                "kafka-eos verify --input <input topic> --output <output topic>.",
                err=True,
            )
        click.echo(
            f"Every restart of the query stops on batch {batch['batch']} "
            f"({verdicts.count(Outcome.COMMITTED)} of its transactions committed). Accept "
            "exactly these, then restart the query:\n  kafka-eos txn resolve "
            f"--checkpoint-location {shlex.quote(checkpoint_location)} --bootstrap-servers "
            f"{shlex.quote(bootstrap_servers)} --batch {batch['batch']} --accept-loss "
            '--reason "..."',
            err=True,
        )


def _txn_ids(transactions: list[DecidedTxnDict]) -> str:
    return ", ".join(t["transactional_id"] for t in transactions)


def print_hanging(report: HangingReportDict) -> None:
    """Each hanging transaction, and what its producer id's coordinator shows now."""
    hanging = report["hanging"]
    older = format_duration(report["older_than_ms"])
    if not hanging:
        click.echo(
            f"no hanging transaction on {report['partitions_checked']} partition(s) (open for "
            f"longer than {older} with no coordinator tracking it)"
        )
        return
    table = Table(box=None, pad_edge=False)
    for column in ("partition", "start offset", "producer id", "epoch", "last write"):
        table.add_column(column, no_wrap=True)
    table.add_column("its producer id's coordinator")
    table.add_column("result")
    for h in hanging:
        coordinator = (
            "no transactional id"
            if h["transactional_id"] is None
            else f"{h['transactional_id']}: {h['coordinator_state']}"
        )
        result = (
            "committed"
            if h["committed"]
            else "aborted"
            if h["aborted"]
            else f"NOT ENDED: {h['error']}"
            if h["error"]
            else "hanging"
        )
        table.add_row(
            f"{h['topic']}[{h['partition']}]",
            str(h["start_offset"]),
            str(h["producer_id"]),
            str(h["producer_epoch"]),
            f"{format_duration(int(h['age_s']) * 1000)} ago",
            coordinator,
            result,
        )
    console().print(table)
