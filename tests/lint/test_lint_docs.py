"""The docs stay in step with the code: rule pages, the rule table, the JSON schema."""

import re

import pytest
import yaml

from connectors.policy import RULES, lint_report
from kafka_eos.lint.docgen import DOCS_DIR, main, rule_page
from kafka_eos.lint.loaders import pipeline_input

LINT_MD = DOCS_DIR.parent / "lint.md"


@pytest.mark.parametrize("rule", RULES.values(), ids=list(RULES))
def test_rule_page_is_generated_from_the_docstring(rule):
    page = DOCS_DIR / f"{rule.meta.id}.md"
    assert page.read_text(encoding="utf-8") == rule_page(rule), (
        "run: python -m kafka_eos.lint.docgen"
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


def documented_pipeline() -> object:
    """The example pipeline file under "### Pipeline file" in docs/lint.md, parsed."""
    text = LINT_MD.read_text(encoding="utf-8")
    match = re.search(r"^### Pipeline file\n.*?^```yaml\n(.*?)^```$", text, re.M | re.S)
    assert match, "docs/lint.md lost its pipeline file example"
    return yaml.safe_load(match.group(1))


@pytest.mark.parametrize("client", [None, "java"])
def test_documented_pipeline_example_lints_clean(client):
    lint_input = pipeline_input(documented_pipeline(), source="docs/lint.md")
    lint_input = lint_input.overlay(client=client).with_default_broker()
    assert lint_input.kafka_eos_source and lint_input.timing.max_idle_time_ms == 3 * 86_400_000
    assert lint_report(lint_input)["findings"] == []


def test_docgen_help_is_help_not_an_output_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as caught:
        main(["--help"])
    assert caught.value.code == 0
    assert "usage: python -m kafka_eos.lint.docgen [-h] [docs_dir]" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []


def test_docgen_writes_every_page_into_the_given_folder(tmp_path, capsys):
    main([str(tmp_path / "pages")])
    assert sorted(p.stem for p in (tmp_path / "pages").iterdir()) == sorted(RULES)
    assert capsys.readouterr().out.count("\n") == len(RULES)
