"""Text and JSON rendering of a report."""

import io
import json

from connectors.policy import Finding, build_report
from kafka_eos.lint.render import print_report, render_text

FINDINGS = [
    Finding(
        "EOS013",
        "warning",
        "auto commit",
        ("enable.auto.commit",),
        {"enable.auto.commit": "true"},
        "set false",
    ),
    Finding("EOS001", "error", "too long", ("transaction.timeout.ms",), {}, "lower it"),
]


class TtyStream(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_text_groups_by_severity_and_names_fix_and_page():
    text = render_text(build_report(FINDINGS, ["EOS001", "EOS013"], "librdkafka")).plain
    assert text.index("ERRORS (1)") < text.index("WARNINGS (1)")
    assert "EOS001 transaction-timeout-above-broker-max" in text
    assert "fix: lower it" in text and "see: docs/lint/EOS001.md" in text
    assert text.rstrip().endswith(
        "1 error, 1 warning, 0 info (2 rules checked, librdkafka defaults)"
    )


def test_empty_report():
    text = render_text(build_report([], ["EOS001"], "java")).plain
    assert text == "no findings (1 rules checked, java defaults)\n"


def test_colour_only_on_a_terminal():
    report = build_report(FINDINGS, ["EOS001"], "librdkafka")
    plain, tty = io.StringIO(), TtyStream()
    print_report(report, "text", plain)
    print_report(report, "text", tty)
    assert "\x1b[" not in plain.getvalue()
    assert "\x1b[" in tty.getvalue()


def test_json_is_the_report():
    report = build_report(FINDINGS, ["EOS001"], "librdkafka")
    stream = TtyStream()
    print_report(report, "json", stream)
    assert json.loads(stream.getvalue()) == report
