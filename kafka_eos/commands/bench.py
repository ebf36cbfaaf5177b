"""``kafka-eos bench``: throughput and memory of each delivery guarantee, side by side."""

from __future__ import annotations

import shlex
import sys
import tempfile
from pathlib import Path

import click

from kafka_eos.commands._cluster import embedded_or_external_kafka


@click.command("bench")
@embedded_or_external_kafka
@click.option("--records", default=200_000, show_default=True, type=click.IntRange(min=1000))
@click.option("--batches", default=10, show_default=True, type=click.IntRange(1, 100))
@click.option("--repeats", default=2, show_default=True, type=click.IntRange(min=1))
@click.option(
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the Markdown report here (e.g. docs/benchmarks.md).",
)
def command(
    bootstrap_servers: str | None,
    kafka_version: str,
    records: int,
    batches: int,
    repeats: int,
    output: Path | None,
) -> None:
    """Run the demo job under none, at_least_once and exactly_once; compare rows/s and RSS."""
    from kafka_eos.bench import render, run_bench, show

    with tempfile.TemporaryDirectory(prefix="kafka-eos-bench-") as workdir:
        measurements = run_bench(
            bootstrap_servers, kafka_version, records, batches, repeats, Path(workdir)
        )
    show(measurements)
    invocation = shlex.join(["kafka-eos", *sys.argv[1:]])
    report = render(measurements, invocation, records, batches, kafka_version)
    click.echo(report)
    if output is not None:
        output.write_text(report)
        click.echo(f"written to {output}")
