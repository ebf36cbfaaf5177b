"""``kafka-eos bench``: side-by-side measurements, each suite a section of one report.

``--suite pipeline`` (the default): throughput and memory of each delivery guarantee.
``--suite source``: what a source task and a trigger cost (``kafka_eos.bench.source``).
``--suite contenders``: ours beside Spark's built-in pipeline, the mixed pairs and a plain
confluent-kafka loop (``kafka_eos.bench.contenders``), with a plot beside the report.
``--suite avro``: the Avro codec beside Confluent's serdes (``kafka_eos.bench.avro``).
"""

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
    "--suite",
    type=click.Choice(["pipeline", "source", "contenders", "avro"]),
    default="pipeline",
    show_default=True,
    help="pipeline: each delivery guarantee; source: the cost of a task and of a trigger; "
    "contenders: ours beside Spark's built-in pipeline and a plain Python loop; avro: the "
    "Avro codec beside Confluent's serializer and deserializer (a 20-field record).",
)
@click.option(
    "--sizes",
    default="100,1000",
    show_default=True,
    help="contenders: record sizes in bytes (key + value), comma-separated.",
)
@click.option(
    "--max-offsets-per-trigger",
    default=100_000,
    show_default=True,
    type=click.IntRange(min=1000),
    help="contenders: the trigger's maxOffsetsPerTrigger, the same for every contender.",
)
@click.option("--tasks", default=200, show_default=True, type=click.IntRange(min=10))
@click.option("--triggers", default=20, show_default=True, type=click.IntRange(min=5))
@click.option(
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the suite's section of this Markdown report (e.g. docs/benchmarks.md), "
    "keeping the other suites' sections.",
)
def command(
    bootstrap_servers: str | None,
    kafka_version: str,
    records: int,
    batches: int,
    repeats: int,
    suite: str,
    tasks: int,
    triggers: int,
    sizes: str,
    max_offsets_per_trigger: int,
    output: Path | None,
) -> None:
    """Measure side by side: the demo job under none, at_least_once and exactly_once (rows/s
    and RSS), or a source task and trigger (``--suite source``: embedded Kafka only)."""
    invocation = shlex.join(["kafka-eos", *sys.argv[1:]])
    if suite == "source":
        from kafka_eos.bench import source

        if bootstrap_servers is not None:
            raise click.UsageError("--suite source starts its own Kafka (with a TLS listener)")
        rows = source.run_source_bench(kafka_version, tasks, triggers, repeats)
        report = source.render(rows, invocation, kafka_version, tasks, triggers)
    elif suite == "avro":
        from kafka_eos.bench import avro

        report = avro.run(records, invocation)
    elif suite == "contenders":
        report = _contenders(
            bootstrap_servers, kafka_version, records, sizes, repeats,
            max_offsets_per_trigger, invocation, output,
        )  # fmt: skip
    else:
        from kafka_eos.bench.pipeline import render, run_bench, show

        with tempfile.TemporaryDirectory(prefix="kafka-eos-bench-") as workdir:
            measurements = run_bench(
                bootstrap_servers, kafka_version, records, batches, repeats, Path(workdir)
            )
        show(measurements)
        report = render(measurements, invocation, records, batches, kafka_version)
    click.echo(report)
    if output is not None:
        write_section(output, suite, report)
        click.echo(f"written to {output}")


def _contenders(
    bootstrap_servers: str | None,
    kafka_version: str,
    records: int,
    sizes: str,
    repeats: int,
    max_offsets: int,
    invocation: str,
    output: Path | None,
) -> str:
    from kafka_eos.bench import contenders, contenders_report

    if bootstrap_servers is not None:
        raise click.UsageError("--suite contenders starts its own Kafka, the same for all")
    try:
        record_sizes = [int(size) for size in sizes.split(",")]
    except ValueError:
        raise click.BadParameter(f"{sizes!r}: give byte counts, e.g. 100,1000") from None
    if any(size < 20 for size in record_sizes):
        raise click.BadParameter(f"{sizes!r}: a record needs at least 20 bytes")
    with tempfile.TemporaryDirectory(prefix="kafka-eos-bench-") as workdir:
        results = contenders.run_contenders(
            kafka_version, records, record_sizes, repeats, max_offsets, Path(workdir)
        )
    plot = None if output is None else output.with_name("benchmarks-contenders.png")
    if plot is not None:
        contenders_report.write_plot(results.runs, record_sizes, plot)
    return contenders_report.render(
        results, invocation, kafka_version, records, record_sizes, max_offsets, plot
    )


def write_section(path: Path, suite: str, markdown: str) -> None:
    """Put ``markdown`` in ``path`` between this suite's markers, in place of what was there,
    or at the end; the rest of the file is kept."""
    begin, end = f"<!-- bench --suite {suite} -->", f"<!-- end bench --suite {suite} -->"
    section = f"{begin}\n{markdown.rstrip()}\n{end}\n"
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + section + rest.split(end, 1)[1].lstrip("\n")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text)
