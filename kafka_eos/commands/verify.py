"""``kafka-eos verify``: does the output hold each input record's result exactly once?

Only composes :mod:`kafka_eos.operations.verify` (and, with ``--prefix``,
:mod:`kafka_eos.operations.lingering`). Exit codes: 0 exactly once holds (and with ``--prefix``
no transaction of the pipeline is open), 1 violation or output not final, 2 usage or
connection errors.
"""

from __future__ import annotations

import json

import click

from checkpoint.errors import KafkaEosError
from connectors.kafka.sink.listing import open_transactions
from connectors.kafka.transactions import TransactionAdmin
from kafka_eos.commands._cluster import (
    JsonErrorsCommand,
    client_options,
    cluster_options,
    failure,
    json_option,
)
from kafka_eos.operations.lingering import reaching
from kafka_eos.operations.verify import VerifyReportDict, verify_topics


@click.command("verify", cls=JsonErrorsCommand)
@cluster_options
@click.option("--input", "input_topic", required=True, help="The pipeline's input topic.")
@click.option("--output", "output_topic", required=True, help="The pipeline's output topic.")
@click.option(
    "--prefix",
    help="The sink's transactionalIdPrefix: its open transactions mean the output is not final.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=60.0,
    show_default=True,
    help="Seconds allowed to read each topic to its end.",
)
@json_option
def command(
    bootstrap_servers: str,
    kafka_options: tuple[str, ...],
    input_topic: str,
    output_topic: str,
    prefix: str | None,
    timeout: float,
    as_json: bool,
) -> None:
    """Check that each input record's result is in the output exactly once, by record key.

    The pipeline must keep the input record's key on its result. Both topics are read to
    their current end as a read_committed consumer sees them.
    """
    options = client_options(kafka_options)
    try:
        report = verify_topics(
            bootstrap_servers, input_topic, output_topic, timeout_s=timeout, config=options
        )
        if prefix:
            config = {"bootstrap.servers": bootstrap_servers, **options}
            with (
                reaching(bootstrap_servers, f"listing the open transactions of {prefix!r}"),
                TransactionAdmin(config, request_timeout_ms=int(timeout * 1000)) as admin,
            ):
                open_ids = [d.transactional_id for d in open_transactions(admin, prefix)]
            report = report.with_open_transactions(open_ids)
    except KafkaEosError as exc:
        raise failure(exc, options) from None
    result = report.to_dict()
    click.echo(json.dumps(result, indent=2) if as_json else _text(result), nl=not as_json)
    if not result["passed"]:
        click.get_current_context().exit(1)


def _text(report: VerifyReportDict) -> str:
    lines = [
        f"input  {report['input_topic']}: {report['inputs']} records",
        f"output {report['output_topic']}: {report['outputs']} records (read_committed)",
    ]
    for kind, meaning, counts in (
        ("missing", "missing from the output", report["missing"]),
        ("duplicated", "more than once in the output", report["duplicated"]),
        ("unexpected", "in the output, not in the input", report["unexpected"]),
    ):
        lines.append(f"{kind:<10} {counts['records']} records, {counts['keys']} keys {meaning}")
        lines.extend(
            f"  key {_key(e['key'])}: {e['seen']} in the output, {e['expected']} in the input"
            for e in counts["examples"]
        )
        if counts["keys"] > len(counts["examples"]):
            lines.append(f"  ... and {counts['keys'] - len(counts['examples'])} more keys")
    open_txns = report["open_transactions"]
    if open_txns:
        lines.append(
            f"open transactions: {', '.join(open_txns)}: the output is not final; run again "
            "once the query committed or stopped (kafka-eos txn list shows them)"
        )
    elif open_txns is not None:
        lines.append("open transactions: none")
    verdict = (
        "exactly once holds"
        if report["passed"]
        else "exactly once is VIOLATED"
        if not report["exactly_once"]
        else "NOT FINAL: exactly once holds so far"
    )
    lines.append(verdict)
    return "\n".join(lines)


def _key(key: str | None) -> str:
    return "<null>" if key is None else repr(key)
