"""``kafka-eos bench --output``: each suite rewrites its own section of the report."""

from __future__ import annotations

from pathlib import Path

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
