"""``kafka-eos demo``: the main job on an embedded Kafka, crashed mid-commit, restarted and
verified by a ``read_committed`` reader."""

from __future__ import annotations

import click

from kafka_eos.commands._cluster import embedded_or_external_kafka


@click.command("demo")
@embedded_or_external_kafka
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
