"""Print a ``ReportDict``: human text grouped by severity, or JSON.

Text is coloured with rich only when the stream is a terminal, so CI logs and pipes get
plain text. Both renderers read the same report, built before anything is printed.
"""

from __future__ import annotations

import json
from typing import TextIO

from rich.console import Console
from rich.text import Text

from connectors.policy.findings import SEVERITIES, FindingDict, ReportDict
from connectors.policy.registry import RULES

_STYLE = {"error": "bold red", "warning": "bold yellow", "info": "bold cyan"}
_PLURAL = {"error": "errors", "warning": "warnings", "info": "info"}


def render_json(report: ReportDict) -> str:
    """The report as stable, indented JSON (see ``docs/lint/schema.json``)."""
    return json.dumps(report, indent=2) + "\n"


def render_text(report: ReportDict) -> Text:
    """The report as rich ``Text``; ``.plain`` is the uncoloured form."""
    summary = report["summary"]
    counts = {"error": summary["errors"], "warning": summary["warnings"], "info": summary["infos"]}
    text = Text()
    for severity in SEVERITIES:
        findings = [f for f in report["findings"] if f["severity"] == severity]
        if findings:
            text.append(f"{_PLURAL[severity].upper()} ({len(findings)})\n", style=_STYLE[severity])
            for finding in findings:
                _append_finding(text, finding)
    checked = f"{len(summary['rules_checked'])} rules checked, {summary['client']} defaults"
    if not report["findings"]:
        text.append(f"no findings ({checked})\n", style="green")
    else:
        totals = ", ".join(f"{counts[s]} {_PLURAL[s] if counts[s] != 1 else s}" for s in SEVERITIES)
        text.append(f"{totals} ({checked})\n")
    return text


def _append_finding(text: Text, finding: FindingDict) -> None:
    rule = RULES[finding["rule"]]
    text.append(f"  {finding['rule']} ", style="bold")
    text.append(f"{rule.meta.name}\n", style="dim")
    text.append(f"    {finding['message']}\n")
    text.append("    fix: ", style="green")
    text.append(f"{finding['fix']}\n")
    text.append(f"    see: {rule.meta.doc_path}\n\n", style="dim")


def print_report(
    report: ReportDict, fmt: str, stream: TextIO, *, color: bool | None = None
) -> None:
    """Write ``report`` as ``fmt`` (``text`` or ``json``); colour only on a terminal by default."""
    if fmt == "json":
        stream.write(render_json(report))
        return
    text = render_text(report)
    if color if color is not None else stream.isatty():
        Console(file=stream, force_terminal=True, highlight=False, soft_wrap=True).print(
            text, end=""
        )
    else:
        stream.write(text.plain)
