"""``kafka-eos demo``: start an embedded Kafka, run a small Spark streaming job against it,
and show what a ``read_committed`` reader of the output sees."""

from __future__ import annotations

import click

from kafka_eos.cluster import DEFAULT_KAFKA_VERSION


@click.command("demo")
@click.option(
    "--bootstrap-servers",
    envvar="KAFKA_BOOTSTRAP_SERVERS",
    default=None,
    help="Use this Kafka instead of starting an embedded one.",
)
@click.option("--kafka-version", default=DEFAULT_KAFKA_VERSION, show_default=True)
@click.option(
    "--records", default=5000, show_default=True, type=click.IntRange(min=10), help="Orders."
)
@click.option(
    "--crash/--no-crash",
    default=True,
    show_default=True,
    help="Kill -9 the first run mid-commit, then restart it.",
)
def command(bootstrap_servers: str | None, kafka_version: str, records: int, crash: bool) -> None:
    """Orders -> Spark -> Kafka exactly once, on a local Kafka and Spark local[*]."""
    from kafka_eos.demo import run_demo

    run_demo(bootstrap_servers, kafka_version, records, crash)
