"""The registry: stable ids, selection, options and per-rule documentation."""

import importlib
import re
import textwrap
from pathlib import Path

import pytest

from connectors.policy import RULES, LintError, LintInput, LintInputError, lint_report, run_rules
from connectors.policy import rules as rules_package
from connectors.policy.registry import discover_rules, rule_ids, selected_rules


def test_ids_are_sequential_and_names_unique():
    assert list(RULES) == [f"EOS{n:03d}" for n in range(1, 19)]
    assert len({rule.meta.name for rule in RULES.values()}) == len(RULES)


@pytest.mark.parametrize("rule", RULES.values(), ids=list(RULES))
def test_every_rule_documents_itself(rule):
    for section in (
        "## What",
        "## Why",
        "## What breaks",
        "## Fix",
        "## Needs",
        "## Examples",
        "## Source",
    ):
        assert section in rule.doc, section
    assert "PASS" in rule.doc and "FAIL" in rule.doc
    assert re.search(r"\*\*(Startup error|Silent loss|Duplicates|Stall)", rule.doc, re.I)
    assert "https://" in rule.doc
    assert f".{rule.meta.id.lower()}_" in rule.module
    for option in rule.meta.options:
        assert f"`{option}`" in rule.doc


def test_select_by_id_or_name_and_ignore():
    assert rule_ids(["eos001", "idempotence-bundle"]) == ["EOS001", "EOS007"]
    chosen = selected_rules(["EOS001", "EOS002"], ignore=["transaction-timeout-too-short"])
    assert [rule.meta.id for rule in chosen] == ["EOS001"]
    assert len(selected_rules()) == len(RULES)


def test_unknown_rule_is_an_input_error():
    with pytest.raises(LintInputError, match="unknown rule 'EOS999'"):
        selected_rules(["EOS999"])


def test_unknown_rule_options_are_rejected():
    with pytest.raises(LintInputError, match="unknown rule 'EOS0'"):
        run_rules(LintInput(rule_options={"EOS0": {"x": 1}}))
    with pytest.raises(LintInputError, match="unknown option 'factor'; expected safety_factor"):
        run_rules(LintInput(rule_options={"EOS002": {"factor": 1}}))


def test_findings_are_sorted_most_severe_first():
    findings = run_rules(LintInput(producer={"transaction.timeout.ms": "3600000"}, broker={}))
    assert [f.rule for f in findings] == ["EOS001", "EOS008", "EOS003"]
    assert [f.severity for f in findings] == ["error", "error", "warning"]


def test_empty_input_has_no_findings():
    assert run_rules(LintInput()) == []


def test_lint_report_names_the_rules_checked():
    report = lint_report(LintInput(client="java"), select=["EOS001", "EOS012"], ignore=["EOS012"])
    assert report["summary"]["rules_checked"] == ["EOS001"]
    assert report["summary"]["client"] == "java"
    assert report["findings"] == []


def test_discovery_finds_every_rule_module_in_the_folder():
    folder = Path(rules_package.__file__).parent
    modules = sorted(f"{rules_package.__name__}.{path.stem}" for path in folder.glob("eos*.py"))
    assert len(modules) == 18
    assert sorted(rule.module for rule in RULES.values()) == modules


_RULE_MODULE = """
    \"\"\"A fake rule.\"\"\"
    from connectors.policy.rule import RuleMeta

    RULE = RuleMeta(id={id!r}, name={name!r}, severity="error")


    def check(ctx):
        return iter(())
"""


def _fake_package(tmp_path, monkeypatch, name, modules):
    package = tmp_path / name
    package.mkdir()
    (package / "__init__.py").write_text('"""Not a rule."""\n')
    for module, text in modules.items():
        (package / f"{module}.py").write_text(textwrap.dedent(text))
    monkeypatch.syspath_prepend(str(tmp_path))
    return importlib.import_module(name)


def test_discovery_orders_by_id_and_skips_private_modules(tmp_path, monkeypatch):
    package = _fake_package(
        tmp_path,
        monkeypatch,
        "fake_rules_ordered",
        {
            "b_second": _RULE_MODULE.format(id="EOS902", name="second"),
            "a_first": _RULE_MODULE.format(id="EOS901", name="first"),
            "z_third": _RULE_MODULE.format(id="EOS900", name="zeroth"),
            "_helpers": "HELPER = 1\n",
        },
    )
    found = discover_rules(package)
    assert list(found) == ["EOS900", "EOS901", "EOS902"]
    assert found["EOS901"].module == "fake_rules_ordered.a_first"
    assert found["EOS901"].doc == "A fake rule."


@pytest.mark.parametrize(
    ("name", "second", "error"),
    [
        (
            "fake_rules_duplicate",
            ("eos901_two", _RULE_MODULE.format(id="EOS901", name="two")),
            r"duplicate rule id EOS901: declared by fake_rules_duplicate\.eos901_one and ",
        ),
        (
            "fake_rules_stray",
            ("helpers", "HELPER = 1\n"),
            r"fake_rules_stray\.helpers is in the rules package but is not a rule: "
            r"it lacks RULE and check",
        ),
    ],
    ids=["duplicate-id", "not-a-rule"],
)
def test_discovery_refuses_a_duplicate_id_or_a_module_that_is_not_a_rule(
    tmp_path, monkeypatch, name, second, error
):
    first = ("eos901_one", _RULE_MODULE.format(id="EOS901", name="one"))
    package = _fake_package(tmp_path, monkeypatch, name, dict([first, second]))
    with pytest.raises(LintError, match=error):
        discover_rules(package)


def test_discovery_refuses_a_package_it_finds_no_rule_in(tmp_path, monkeypatch):
    """Linting with no rules would report a clean configuration."""
    package = _fake_package(tmp_path, monkeypatch, "fake_rules_empty", {"_helpers": "H = 1\n"})
    with pytest.raises(LintError, match=r"no rule module found in fake_rules_empty"):
        discover_rules(package)
