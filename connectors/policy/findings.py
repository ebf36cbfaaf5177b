"""Findings and the versioned JSON report, typed from day one.

Findings are built first and printed second: ``render`` turns a ``ReportDict`` into text
or JSON, so both outputs always say the same thing. ``docs/lint/schema.json`` is the JSON
Schema of ``ReportDict``; a test keeps the two in step.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal, TypedDict

from connectors.redact import redact_value

Severity = Literal["error", "warning", "info"]
# Most severe first: the order of the text report and of the sort below.
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info")

REPORT_VERSION: Literal[1] = 1


class FindingDict(TypedDict):
    """One finding in the JSON report."""

    rule: str
    severity: Severity
    message: str
    keys: list[str]
    values: dict[str, str]
    fix: str


class SummaryDict(TypedDict):
    """Counts per severity plus what was checked, so an empty report is still informative."""

    errors: int
    warnings: int
    infos: int
    rules_checked: list[str]
    client: str


class ReportDict(TypedDict):
    """The whole ``--format json`` document; ``version`` changes on any incompatible edit."""

    version: Literal[1]
    findings: list[FindingDict]
    summary: SummaryDict


@dataclass(frozen=True)
class Finding:
    """One broken expectation: the keys involved, the values seen, and how to fix it.

    ``values`` maps each key (config key or timing assumption) to the value seen; secret
    keys are redacted on construction so a finding can never carry a credential.
    """

    rule: str
    severity: Severity
    message: str
    keys: tuple[str, ...]
    values: Mapping[str, str] = field(default_factory=dict, hash=False)
    fix: str = ""

    def __post_init__(self) -> None:
        redacted = {k: redact_value(k, v) for k, v in self.values.items()}
        object.__setattr__(self, "values", redacted)

    def to_dict(self) -> FindingDict:
        """The finding as it appears in the JSON report."""
        return FindingDict(
            rule=self.rule,
            severity=self.severity,
            message=self.message,
            keys=list(self.keys),
            values=dict(self.values),
            fix=self.fix,
        )


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Most severe first, then by rule id, keeping each rule's own order otherwise."""
    return sorted(findings, key=lambda f: (SEVERITIES.index(f.severity), f.rule))


def build_report(
    findings: Iterable[Finding], rules_checked: Iterable[str], client: str
) -> ReportDict:
    """Assemble the versioned report that both renderers print."""
    ordered = sort_findings(findings)
    counts = {severity: sum(f.severity == severity for f in ordered) for severity in SEVERITIES}
    return ReportDict(
        version=REPORT_VERSION,
        findings=[f.to_dict() for f in ordered],
        summary=SummaryDict(
            errors=counts["error"],
            warnings=counts["warning"],
            infos=counts["info"],
            rules_checked=list(rules_checked),
            client=client,
        ),
    )
