"""``kafka-eos bench --output``: each suite rewrites its own section of the report, and the
contenders' section judges each target from the median runs."""

from __future__ import annotations

from pathlib import Path

from kafka_eos.bench.contenders import (
    OUR_SINK,
    OURS_AT_LEAST_ONCE,
    OURS_EXACTLY_ONCE,
    PYTHON_SINK_CEILING,
    QUIX,
    SPARK_BUILT_IN,
    TENTH,
    Results,
    Run,
    medians,
)
from kafka_eos.bench.contenders_report import render
from kafka_eos.bench.latency import Latency
from kafka_eos.bench.recovery import Recovery
from kafka_eos.commands.bench import write_section


def test_each_suite_replaces_its_section_and_keeps_the_rest(tmp_path: Path) -> None:
    report = tmp_path / "benchmarks.md"
    report.write_text("# Benchmarks\n\nIntro kept.\n")
    write_section(report, "pipeline", "## Pipeline\n\nold numbers\n")
    write_section(report, "source", "## Source\n\nsource numbers\n")
    write_section(report, "pipeline", "## Pipeline\n\nnew numbers\n")
    text = report.read_text()
    assert text.startswith("# Benchmarks\n\nIntro kept.\n")
    assert "old numbers" not in text
    assert text.index("new numbers") < text.index("source numbers")  # the section stays put
    assert text.count("<!-- bench --suite pipeline -->") == 1
    assert text.count("<!-- end bench --suite source -->") == 1


def test_a_new_report_gets_a_title(tmp_path: Path) -> None:
    report = tmp_path / "benchmarks.md"
    write_section(report, "source", "## Source\n")
    assert report.read_text().startswith("# Benchmarks\n\n<!-- bench --suite source -->\n")


def _run(contender: str, rows_per_s: float, rss: int = 0, commits: tuple[int, ...] = ()) -> Run:
    seconds = 100_000 / rows_per_s
    return Run(contender, 100, 100_000, seconds, rss, commits, (8,) * len(commits), None)


def test_contenders_are_compared_on_their_median_run_and_each_target_judged() -> None:
    runs = [
        *(_run(SPARK_BUILT_IN, r) for r in (10_000, 40_000, 20_000)),
        *(_run(OURS_EXACTLY_ONCE, r, 200 * 2**20, (25, 30)) for r in (30_000, 25_000, 90_000)),
        *(_run(OURS_AT_LEAST_ONCE, r) for r in (31_000, 31_000, 31_000)),
        _run(OUR_SINK, 15_000),
        _run(QUIX, 40_000),
        _run(PYTHON_SINK_CEILING, 25_000),
        _run(TENTH, 1_000, 100 * 2**20),
    ]
    assert medians(runs, 100)[SPARK_BUILT_IN].rows_per_s == 20_000  # a real run, the median
    latency = Latency(OURS_EXACTLY_ONCE, 500, (900.0, 1_100.0, 1_000.0))
    command = "kafka-eos bench --suite contenders"
    recovery = Recovery(OURS_EXACTLY_ONCE, 100_000, 21.5, 100_000, 0, 0)
    results = Results(runs, [latency], [recovery])
    report = render(results, command, "4.3.1", 100_000, [100], 10, None)
    assert "| `kafka-eos` -> `kafka-eos` exactly_once | 30,000 | 3.0 | 1.50x | 200 |" in report
    assert "ours exactly_once >= 1.2x Spark's built-in pipeline: 1.50x, met" in report
    assert "exactly_once >= 0.95x our at_least_once: 0.97x, met" in report
    assert "plain confluent-kafka loop" not in report  # not run: not judged
    assert "ours >= 1.0x Quix Streams exactly-once: 0.75x, **missed**" in report
    assert "drops its rows): 1.25x Spark's built-in; our sink runs at 0.60x that" in report
    assert "| `kafka-eos` -> `kafka-eos` exactly_once | 21.5 | 100,000 | 0 | 0 |" in report
    assert "driver commit p50 <= 20 ms: 25 ms, **missed**" in report
    assert "(2.00x), **missed**" in report  # worker RSS doubled with 10x the records
    assert TENTH not in report.split("Targets")[0]  # its own line, not a table row
    assert "| `kafka-eos` -> `kafka-eos` exactly_once | 3 | 1,000 | 1,100 |" in report
