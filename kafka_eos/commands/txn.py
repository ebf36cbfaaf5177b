"""``kafka-eos txn``: list and abort lingering Kafka transactions, resolve stuck batches, find
and abort hanging transactions.

Only composes :mod:`kafka_eos.operations.lingering`, :mod:`kafka_eos.operations.resolve` and
:mod:`kafka_eos.operations.hanging`: parse the options, call, print. Exit codes: 0 done, 1 a
transaction was refused (decided), its abort failed, a batch lost transactions, or a hanging
transaction was found (and not aborted), 2 usage or cluster errors.
"""

from __future__ import annotations

import getpass
import json
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager

import click
import kafka.errors as Errors

from checkpoint.errors import KafkaEosError
from connectors.kafka.cluster_facts import read_cluster
from connectors.kafka.sink.committer import KafkaCommitter
from connectors.kafka.sink.listing import open_transactions
from connectors.kafka.sink.outcome import UNCONFIRMABLE
from connectors.kafka.sink.owners import locate_queries
from connectors.options import OptionError, duration_ms
from kafka_eos.commands._cluster import (
    JsonErrorsCommand,
    client_options,
    cluster_options,
    console,
    failure,
    json_option,
)
from kafka_eos.commands._txn_text import (
    print_hanging,
    print_outcome,
    print_plan,
    print_resolve,
    print_way_forward,
    query_text,
    txn_cells,
    txn_table,
)
from kafka_eos.operations.hanging import (
    Hanging,
    HangingDict,
    abort_hanging,
    commit_hanging,
    find_hanging,
    hanging_dict,
    hanging_report,
    max_transaction_timeout_ms,
    partitions_of,
)
from kafka_eos.operations.lingering import (
    AbortOutcome,
    Result,
    TxnListDict,
    Verdict,
    abort_lingering,
    abort_report,
    decided_transactions,
    listed_txn_dict,
    live_queries,
    plan_abort,
    reaching,
)
from kafka_eos.operations.resolve import (
    ResolveReportDict,
    accept_loss,
    named,
    open_decisions,
    resolve_report,
    select,
    stuck_batches,
)

_UNDECIDABLE_WARNING = (
    "WARNING: without --checkpoint-location a transaction the sink already decided to commit "
    "looks like any lingering one, and aborting it loses its records. Stop the query first, "
    "and pass its checkpointLocation when you have it."
)

_timeout_option = click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=30.0,
    show_default=True,
    help="Seconds allowed per request and per EndTxn (with its retries).",
)


@click.group("txn")
def command() -> None:
    """List and abort lingering Kafka transactions (they hold back read_committed readers),
    and resolve a decided batch that can no longer commit."""


@command.command("list", cls=JsonErrorsCommand)
@cluster_options
@click.option(
    "--prefix",
    help="Only the ids of sinks with this transactionalIdPrefix, of every query "
    "(<prefix>-<owner>-<task>-<slot>; <prefix>-<task> before owners).",
)
@click.option("--all-states", is_flag=True, help="Also ended ones (Empty, CompleteCommit, ...).")
@json_option
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
        queries = locate_queries(
            lambda: committer.admin.kafka_admin,
            bootstrap_servers,
            (d.transactional_id for d in described),
        )
    found = [listed_txn_dict(d, queries) for d in described]
    if as_json:
        listing: TxnListDict = {"version": 1, "transactions": found}
        click.echo(json.dumps(listing, indent=2))
        return
    if not found:
        scope = f" of prefix {prefix!r}" if prefix else ""
        click.echo(f"no {'' if all_states else 'Ongoing '}transactions{scope}")
        return
    table = txn_table("query (checkpoint location)")
    for txn in found:
        table.add_row(*txn_cells(txn), query_text(txn["query"]))
    console().print(table)


@command.command("abort", cls=JsonErrorsCommand)
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
@json_option
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
    """Abort lingering Ongoing transactions, never one the sink decided to commit. Each abort
    is a fence: the transaction's producer, if it still runs, can write no more."""
    if bool(prefix) == bool(transactional_ids):
        raise click.UsageError("give either --prefix or --transactional-id (repeatable)")
    if checkpoint_location is None and not (yes or dry_run) and as_json:
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
        aborting = [c.transactional_id for c in plan if c.verdict == Verdict.ABORT]
        live = live_queries(
            locate_queries(lambda: committer.admin.kafka_admin, bootstrap_servers, aborting),
            now_ms=int(time.time() * 1000),
        )
        for warning in live:
            click.echo(f"WARNING: {warning}", err=True)
        ask = not (yes or dry_run) and (checkpoint_location is None or bool(live))
        if ask and as_json:
            raise click.UsageError("--json cannot ask for confirmation: add --yes")
        if not as_json:
            print_plan(abort_report(plan, [], dry_run=True, decisions_checked=decided is not None))
        outcomes: list[AbortOutcome] = []
        if not dry_run and aborting:
            if ask:
                click.confirm("Abort the transactions marked 'would abort'?", abort=True)
            with reaching(bootstrap_servers, "aborting transactions"):
                outcomes = abort_lingering(committer, plan)
    report = abort_report(plan, outcomes, dry_run=dry_run, decisions_checked=decided is not None)
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        print_outcome(report, checkpoint_location)
    summary = report["summary"]
    if summary[Result.REFUSED] or summary[Result.ABORT_FAILED]:
        click.get_current_context().exit(1)


@command.command("find-hanging", cls=JsonErrorsCommand)
@cluster_options
@click.option(
    "--topic",
    "topics",
    multiple=True,
    required=True,
    help="Look at every partition of this topic, e.g. the query's output (repeatable).",
)
@click.option(
    "--older-than",
    help="Only transactions whose producer last wrote longer ago than this (e.g. 15m, 30s); "
    "default: the brokers' transaction.max.timeout.ms, longer than any live transaction.",
)
@click.option(
    "--commit",
    "committing",
    is_flag=True,
    help="Write the COMMIT marker for each one of the --prefix sink's transactions whose "
    "coordinator shows it committed (transactions V2; a marker Kafka 4.x skipped, KAFKA-20734).",
)
@click.option(
    "--prefix",
    help="With --commit: the transactionalIdPrefix of the kafka-eos sink that writes the topics.",
)
@click.option(
    "--abort",
    "aborting",
    is_flag=True,
    help="Write an abort marker for each one whose coordinator shows the abort that ended it.",
)
@click.option(
    "--force",
    is_flag=True,
    help="With --abort: also those it cannot show were not committed (checked by hand first).",
)
@click.option("--yes", is_flag=True, help="Write the markers without asking.")
@json_option
@_timeout_option
def find_hanging_command(
    bootstrap_servers: str,
    kafka_options: tuple[str, ...],
    topics: tuple[str, ...],
    older_than: str | None,
    committing: bool,
    prefix: str | None,
    aborting: bool,
    force: bool,
    yes: bool,
    as_json: bool,
    timeout: float,
) -> None:
    """Find transactions open on a partition that no coordinator tracks (KIP-664): they pin
    the partition's last stable offset, and every read_committed reader, for good; `txn list`
    cannot see them. With --commit, write the COMMIT marker of each one its coordinator shows
    committed; with --abort, an abort marker for each one its coordinator shows aborted
    (--force: also when it cannot show that it did not commit)."""
    if committing and not prefix:
        raise click.UsageError(
            "--commit needs --prefix: only a kafka-eos sink's ids show a commit it can trust"
        )
    if force and not aborting:
        raise click.UsageError("--force only changes --abort: add --abort")
    ending = committing or aborting
    if ending and not yes and (as_json or not _interactive()):
        raise click.UsageError(
            "--commit and --abort ask first, and no one can answer here: add --yes"
        )
    options = client_options(kafka_options)
    now_ms = int(time.time() * 1000)
    with _committer(bootstrap_servers, options, timeout) as committer:
        with reaching(bootstrap_servers, "looking for hanging transactions"):
            if older_than is None:
                cluster = read_cluster(bootstrap_servers, [], options=options, timeout_s=timeout)
                older_than_ms = max_transaction_timeout_ms(cluster.broker_config)
            else:
                older_than_ms = _duration("--older-than", older_than)
            partitions = partitions_of(committer.admin.kafka_admin, topics)
            found = find_hanging(
                committer.admin, partitions, older_than_ms=older_than_ms, now_ms=now_ms
            )
        entries = [hanging_dict(h, now_ms) for h in found]
        if ending and found:
            if not as_json:
                print_hanging(hanging_report(entries, older_than_ms, len(partitions)))
            if not yes:
                click.confirm("Write the markers for these?", abort=True)
            entries = [
                _end_one(
                    committer,
                    h,
                    now_ms,
                    commit=prefix if committing else None,
                    abort=aborting,
                    force=force,
                )
                for h in found
            ]
    report = hanging_report(entries, older_than_ms, len(partitions))
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        print_hanging(report)
    if not all(e["committed"] or e["aborted"] for e in entries):
        click.get_current_context().exit(1)


def _end_one(
    committer: KafkaCommitter,
    hanging: Hanging,
    now_ms: int,
    *,
    commit: str | None,
    abort: bool,
    force: bool,
) -> HangingDict:
    """Its COMMIT marker where asked (``commit``: the sink's prefix) and its coordinator shows
    the commit, else its abort marker where asked and allowed; every refusal is reported."""
    committed: bool | None = False if commit else None
    aborted: bool | None = None  # None: no abort marker was tried
    refusals: list[str] = []
    try:
        if commit:
            refused = commit_hanging(committer.admin, hanging, prefix=commit)
            committed = refused is None
            refusals += [refused] if refused else []
        if abort and not committed:
            refused = abort_hanging(committer.admin, hanging, force=force)
            aborted = refused is None
            refusals += [refused] if refused else []
    except (Errors.KafkaError, KafkaEosError) as exc:
        aborted = False if abort and not committed else aborted
        refusals.append(f"{type(exc).__name__}: {exc}")
    error = "; ".join(refusals) or None  # a refused commit stays said when the abort went out
    return hanging_dict(hanging, now_ms, committed=committed, aborted=aborted, error=error)


def _duration(option: str, text: str) -> int:
    try:
        return duration_ms(option, text)
    except OptionError as exc:
        raise click.BadParameter(exc.message, param_hint=option) from None


@command.command("resolve", cls=JsonErrorsCommand)
@cluster_options
@click.option("--checkpoint-location", required=True, help="The query's checkpointLocation.")
@click.option(
    "--batch", "batch_id", type=click.IntRange(min=0), help="Only this decided, unconfirmed batch."
)
@click.option(
    "--accept-loss",
    "accepting",
    is_flag=True,
    help="Commit what still can be, then confirm the batch with its lost transactions on record.",
)
@click.option("--reason", help="Why the loss is accepted (incident, ticket); with --accept-loss.")
@click.option("--yes", is_flag=True, help="Accept the loss without asking.")
@json_option
@_timeout_option
def resolve_command(
    bootstrap_servers: str,
    kafka_options: tuple[str, ...],
    checkpoint_location: str,
    batch_id: int | None,
    accepting: bool,
    reason: str | None,
    yes: bool,
    as_json: bool,
    timeout: float,
) -> None:
    """Show the decided batches not confirmed yet and where their transactions stand; with
    --accept-loss, confirm one past its lost transactions, so that the query goes on."""
    reason = (reason or "").strip()
    if accepting != bool(reason):
        raise click.UsageError('--accept-loss and --reason "why" go together')
    if accepting and not yes and (as_json or not _interactive()):
        raise click.UsageError("--accept-loss asks first, and no one can answer here: add --yes")
    options = client_options(kafka_options)
    with _committer(bootstrap_servers, options, timeout) as committer:
        store = open_decisions(checkpoint_location)
        with reaching(bootstrap_servers, "describing the decided transactions"):
            batches = named(stuck_batches(store, committer.admin), batch_id)
        if not accepting:
            report = resolve_report(batches)
            _print_resolve(report, as_json)
            if not as_json:
                print_way_forward(report, checkpoint_location, bootstrap_servers)
            if any(b["summary"][v] for b in report["batches"] for v in UNCONFIRMABLE):
                click.get_current_context().exit(1)
            return
        batch = select(batches)
        if not yes:
            print_resolve(resolve_report([batch]))
            click.confirm(
                f"Accept the loss of the LOST transactions of batch {batch.checkpoint_id}?",
                abort=True,
            )
        with reaching(bootstrap_servers, "committing the committable transactions"):
            after, confirmation = accept_loss(
                committer,
                store,
                batch,
                reason=reason,
                accepted_by=_operator(),
                now_ms=int(time.time() * 1000),
            )
    _print_resolve(resolve_report([after], confirmation), as_json)


def _print_resolve(report: ResolveReportDict, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        print_resolve(report)


def _interactive() -> bool:
    """Whether someone can answer a prompt: a run from cron or CI must say --yes up front."""
    return sys.stdin.isatty()


def _operator() -> str:
    """Who accepts a loss, for its record: the local user at this host."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no login name for this uid (some containers)
        user = "unknown-user"
    return f"{user}@{socket.gethostname()}"


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
    # Without a naming it only ends the transactions it is given: all these commands ask.
    try:
        with closing(KafkaCommitter(config, timeout_s=timeout)) as committer:
            yield committer
    except KafkaEosError as exc:
        raise failure(exc, options) from None
