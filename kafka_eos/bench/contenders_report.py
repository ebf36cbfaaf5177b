"""The contenders' section of docs/benchmarks.md: a table per record size, ratios to Spark's
built-in pipeline, the driver's commits, each target of issue 15 met or missed, and a plot."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kafka_eos.bench.contenders import (
    OUR_SINK,
    OURS_AT_LEAST_ONCE,
    OURS_EXACTLY_ONCE,
    PLAIN_LOOP,
    PYTHON_SINK_CEILING,
    QUIX,
    SPARK_BUILT_IN,
    TENTH,
    Results,
    Run,
    all_commits,
    median_of,
    medians,
)
from kafka_eos.bench.latency import Latency
from kafka_eos.bench.pipeline import percentile, report_header
from kafka_eos.bench.recovery import KILL_INTO_BATCH_S, Recovery

MIB = 2**20
TITLE = "Contenders: side by side with Spark's built-in pipeline"
NONE = "-"


def render(
    results: Results,
    command: str,
    kafka: str,
    records: int,
    sizes: Sequence[int],
    max_offsets: int,
    plot: Path | None,
) -> str:
    runs = results.runs
    repeats = sum(1 for r in runs if r.contender == SPARK_BUILT_IN and r.record_bytes == sizes[0])
    lines = [
        *report_header(TITLE, "kafka-eos bench --suite contenders", command),
        f"- Kafka {kafka}, one KRaft node (local process); Spark `local[2]`; Spark's connector "
        "`spark-sql-kafka-0-10_2.13` 4.2.0",
        f"- input: {records:,} records of {' and '.join(f'{s} B' for s in sizes)} (key + "
        f"value), 8 partitions, read from `earliest`; `maxOffsetsPerTrigger` {max_offsets:,}, "
        '`Trigger.AvailableNow`, identity `selectExpr("key", "value")`, 8 output partitions',
        f"- {repeats} interleaved runs per contender and size; each row is the run with the "
        "median rows/s. rows/s: input rows over the summed `triggerExecution` of the "
        "micro-batches (JVM start excluded); the plain loop: its wall time; Quix Streams: from "
        "its first record to its end (group join excluded); PyFlink: its job's net runtime "
        "(its tasks' start and the final checkpoint included, the JVM's start excluded). "
        "Python RSS: the largest PySpark "
        "worker's peak; Quix Streams: its one process. Output: the read_committed count of "
        "each contender's last run",
    ]
    if plot is not None:
        lines += ["", f"![rows/s per contender]({plot.name})"]
    for size in sizes:
        lines += _table(runs, size)
    lines += _commit_lines(runs)
    lines += _latency_lines(results.latencies)
    lines += _recovery_lines(results.recoveries)
    lines += _targets(runs, sizes)
    return "\n".join(lines) + "\n"


def _table(runs: Sequence[Run], size: int) -> list[str]:
    best = medians(runs, size)
    base = best[SPARK_BUILT_IN].rows_per_s
    lines = [
        "",
        f"### {size} B records",
        "",
        "| pipeline (source -> sink) | rows/s | MB/s | vs Spark built-in | Python RSS (MiB) "
        "| output rows (read_committed) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, run in best.items():
        mine = [r for r in runs if r.contender == name and r.record_bytes == size]
        counted = [r.output_rows for r in mine if r.output_rows is not None]
        rss = f"{run.python_worker_rss / MIB:,.0f}" if run.python_worker_rss else NONE
        lines.append(
            f"| {name} | {run.rows_per_s:,.0f} | {run.mb_per_s:,.1f} | "
            f"{run.rows_per_s / base:.2f}x | {rss} | "
            f"{f'{counted[-1]:,} of {run.rows:,}' if counted else NONE} |"
        )
    return lines


def _latency_lines(latencies: Sequence[Latency]) -> list[str]:
    if not latencies:
        return []
    lines = [
        "",
        "End-to-end latency of small batches: a record produced every 10 ms, a 1 s "
        "processing-time trigger, from produce to arrival at a read_committed consumer "
        "(records of the first 30 s left out):",
        "",
        "| pipeline | records measured | p50 (ms) | p99 (ms) |",
        "| --- | ---: | ---: | ---: |",
    ]
    for latency in latencies:
        lines.append(
            f"| {latency.contender} | {len(latency.latencies_ms):,} | "
            f"{latency.percentile(0.5):,.0f} | {latency.percentile(0.99):,.0f} |"
        )
    return lines


def _recovery_lines(recoveries: Sequence[Recovery]) -> list[str]:
    if not recoveries:
        return []
    lines = [
        "",
        f"Recovery after a driver kill: the whole job (JVM and Python) killed "
        f"{KILL_INTO_BATCH_S:.0f} s into its second micro-batch, then the same query restarted "
        "on its checkpoint; the time from the kill to the end of the restarted query's first "
        "micro-batch (a new JVM and session, the sink's recovery, the replayed batch), and what "
        "a read_committed reader saw once the query had finished:",
        "",
        "| pipeline | recovery (s) | records | duplicates | lost |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for r in recoveries:
        lines.append(
            f"| {r.contender} | {r.recovery_s:.1f} | {r.records:,} | {r.duplicates:,} | "
            f"{r.lost:,} |"
        )
    return lines


def _commit_lines(runs: Sequence[Run]) -> list[str]:
    lines = [
        "",
        "Driver commits of our exactly_once sink (decision to confirmation: one EndTxn per "
        "transaction, sent concurrently):",
        "",
    ]
    for name in (OURS_EXACTLY_ONCE, OUR_SINK):
        commits = all_commits(runs, name)
        counts = [n for r in runs if r.contender == name for n in r.transactions_per_commit]
        if commits:
            lines.append(
                f"- {name}: p50 {percentile(commits, 0.5):.0f} ms, p99 "
                f"{percentile(commits, 0.99):.0f} ms over {len(commits)} batches, "
                f"{median_of(counts):.0f} transactions per commit (median)"
            )
    return lines


# (what, contender, compared with, least ratio): the throughput targets of issue 15.
TARGETS = (
    ("ours exactly_once >= 1.2x Spark's built-in pipeline", OURS_EXACTLY_ONCE, SPARK_BUILT_IN, 1.2),
    ("Spark's source -> our sink >= 1.0x Spark's built-in", OUR_SINK, SPARK_BUILT_IN, 1.0),
    ("exactly_once >= 0.95x our at_least_once", OURS_EXACTLY_ONCE, OURS_AT_LEAST_ONCE, 0.95),
    ("ours >= 0.7x the plain confluent-kafka loop", OURS_EXACTLY_ONCE, PLAIN_LOOP, 0.7),
    ("ours >= 1.0x Quix Streams exactly-once", OURS_EXACTLY_ONCE, QUIX, 1.0),
)


def _targets(runs: Sequence[Run], sizes: Sequence[int]) -> list[str]:
    lines = ["", "Targets (issue 15), from this run:", ""]
    for size in sizes:
        best = medians(runs, size)
        rate = {name: run.rows_per_s for name, run in best.items()}
        for what, ours, other, target in TARGETS:
            if ours in rate and other in rate:
                ratio = rate[ours] / rate[other]
                verdict = "met" if ratio >= target else "**missed**"
                lines.append(f"- {size} B: {what}: {ratio:.2f}x, {verdict}")
        if {PYTHON_SINK_CEILING, OUR_SINK, SPARK_BUILT_IN} <= rate.keys():
            ceiling = rate[PYTHON_SINK_CEILING] / rate[SPARK_BUILT_IN]
            lines.append(
                f"  - {size} B: the ceiling of any Python sink ({PYTHON_SINK_CEILING}): "
                f"{ceiling:.2f}x Spark's built-in; our sink runs at "
                f"{rate[OUR_SINK] / rate[PYTHON_SINK_CEILING]:.2f}x that ceiling"
            )
    commits = all_commits(runs, OURS_EXACTLY_ONCE)
    if commits:
        p50 = percentile(commits, 0.5)
        verdict = "met" if p50 <= 20 else "**missed**"
        lines.append(f"- driver commit p50 <= 20 ms: {p50:.0f} ms, {verdict}")
    full = medians(runs, sizes[0]).get(OURS_EXACTLY_ONCE)
    tenth = next((r for r in runs if r.contender == TENTH), None)
    if full and tenth and tenth.python_worker_rss:
        growth = full.python_worker_rss / tenth.python_worker_rss
        small, large = tenth.python_worker_rss / MIB, full.python_worker_rss / MIB
        lines.append(
            f"- Python worker RSS flat as the records grow 10x: {small:,.0f} MiB at "
            f"{tenth.rows:,} records, {large:,.0f} MiB at {full.rows:,} ({growth:.2f}x), "
            f"{'met' if growth <= 1.1 else '**missed**'}"
        )
    return lines


def write_plot(runs: Sequence[Run], sizes: Sequence[int], path: Path) -> None:
    """Grouped bars: median rows/s per contender, one group per record size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(medians(runs, sizes[0]))
    figure, axes = plt.subplots(figsize=(10, 4.5))
    width = 0.8 / len(sizes)
    for i, size in enumerate(sizes):
        best = medians(runs, size)
        values = [best[n].rows_per_s if n in best else 0 for n in names]
        axes.barh([y + i * width for y in range(len(names))], values, width, label=f"{size} B")
    axes.set_yticks([y + width * (len(sizes) - 1) / 2 for y in range(len(names))])
    axes.set_yticklabels([n.replace("`", "") for n in names], fontsize=8)
    axes.invert_yaxis()
    axes.set_xlabel("rows/s (median run)")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
