"""The docs stay in step with the code: rule pages, the rule table, the JSON schema."""

import re

import pytest

from connectors.lint import RULES
from connectors.lint.docgen import DOCS_DIR, rule_page

LINT_MD = DOCS_DIR.parent / "lint.md"


@pytest.mark.parametrize("rule", RULES.values(), ids=list(RULES))
def test_rule_page_is_generated_from_the_docstring(rule):
    page = DOCS_DIR / f"{rule.meta.id}.md"
    assert page.read_text(encoding="utf-8") == rule_page(rule), (
        "run: python -m connectors.lint.docgen"
    )


def test_no_page_without_a_rule():
    pages = {path.stem for path in DOCS_DIR.glob("EOS*.md")}
    assert pages == set(RULES)


def test_rule_table_lists_every_rule():
    text = LINT_MD.read_text(encoding="utf-8")
    rows = re.findall(
        r"^\| \[(EOS\d{3})\]\(lint/(EOS\d{3})\.md\) \| (\w+) \| ([\w-]+) \| (.+) \|$", text, re.M
    )
    assert [row[0] for row in rows] == list(RULES)
    for rule_id, page_id, severity, name, summary in rows:
        meta = RULES[rule_id].meta
        assert (page_id, severity, name, summary) == (
            rule_id,
            meta.severity,
            meta.name,
            RULES[rule_id].summary,
        )


def test_ci_examples_use_strict():
    text = LINT_MD.read_text(encoding="utf-8")
    assert "```sh\nkafka-eos lint --strict" in text
    assert "run: kafka-eos lint --strict" in text
