"""Generate ``docs/lint/<ID>.md`` from the rule docstrings, the single source of the docs.

Run ``python -m kafka_eos.lint.docgen`` after editing a rule; a test fails while the
pages are out of date.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from connectors.policy.registry import RULES
from connectors.policy.rule import Rule

DOCS_DIR = Path(__file__).resolve().parents[2] / "docs" / "lint"


def rule_page(rule: Rule) -> str:
    """The Markdown page of ``rule``: a header with id, name, severity and options, then its doc."""
    meta = rule.meta
    options = ", ".join(f"`{name}` = {value:g}" for name, value in meta.options.items()) or "none"
    summary, _, body = rule.doc.partition("\n")
    return (
        f"<!-- Generated from {rule.module.replace('.', '/')}.py by"
        " `python -m kafka_eos.lint.docgen`;"
        " edit the docstring, not this page. -->\n\n"
        f"# {meta.id}: {meta.name}\n\n"
        f"{summary}\n\n"
        f"Severity: **{meta.severity}** · Options: {options}\n"
        f"{body}\n"
    )


def write_pages(docs_dir: Path = DOCS_DIR) -> list[Path]:
    """Write every rule page into ``docs_dir``; returns the paths written."""
    docs_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for rule in RULES.values():
        path = docs_dir / f"{rule.meta.id}.md"
        path.write_text(rule_page(rule), encoding="utf-8")
        written.append(path)
    return written


def main(argv: Sequence[str] | None = None) -> None:
    """Command line: ``python -m kafka_eos.lint.docgen [DOCS_DIR]``; ``--help`` says so."""
    parser = argparse.ArgumentParser(
        prog="python -m kafka_eos.lint.docgen",
        description="Write docs/lint/<ID>.md for every rule from its module docstring.",
    )
    parser.add_argument(
        "docs_dir",
        nargs="?",
        type=Path,
        default=DOCS_DIR,
        help=f"folder to write the pages into (default: {DOCS_DIR})",
    )
    args = parser.parse_args(argv)
    for page in write_pages(args.docs_dir):
        print(page)


if __name__ == "__main__":
    main()
