"""The single registry of rules, and ``run_rules``: the one way findings are produced.

Rules are selected by id (``EOS001``) or name (``transaction-timeout-above-broker-max``);
ids are stable, so CI configs that name them keep working.

Rules are discovered, not listed: every module of the package ``connectors.policy.rules``
is a rule and must declare ``RULE = RuleMeta(...)`` and ``check(ctx)``. Adding a rule is
adding its module. A module whose name starts with ``_`` (a private helper) is skipped; any
other module without ``RULE`` or ``check`` is refused with a ``LintError`` naming it, so a
misnamed or half-written rule fails at import instead of silently not running. Two
modules declaring the same id are refused the same way. ``RULES`` is ordered by id.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Iterable, Mapping
from types import MappingProxyType, ModuleType

from connectors.policy import rules as _rules_package
from connectors.policy.context import LintContext
from connectors.policy.errors import LintError, LintInputError
from connectors.policy.findings import Finding, ReportDict, build_report, sort_findings
from connectors.policy.inputs import LintInput
from connectors.policy.rule import Rule


def discover_rules(package: ModuleType) -> Mapping[str, Rule]:
    """Every rule module of ``package``, by id in id order; see the module docstring."""
    found: dict[str, Rule] = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda info: info.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        rule = _rule(module)
        if rule.meta.id in found:
            raise LintError(
                f"duplicate rule id {rule.meta.id}: declared by {found[rule.meta.id].module} "
                f"and {rule.module}"
            )
        found[rule.meta.id] = rule
    if not found:
        # An import mechanism that cannot list the package would otherwise lint with no rules
        # and report a clean configuration.
        raise LintError(f"no rule module found in {package.__name__} ({package.__path__})")
    return MappingProxyType(dict(sorted(found.items())))


def _rule(module: ModuleType) -> Rule:
    missing = [name for name in ("RULE", "check") if not hasattr(module, name)]
    if missing:
        raise LintError(
            f"{module.__name__} is in the rules package but is not a rule: it lacks "
            f"{' and '.join(missing)} (rename it with a leading '_' if it is a helper)"
        )
    return Rule(
        meta=module.RULE,
        check=module.check,
        doc=inspect.cleandoc(module.__doc__ or ""),
        module=module.__name__,
    )


RULES: Mapping[str, Rule] = discover_rules(_rules_package)
_BY_NAME: Mapping[str, str] = {rule.meta.name: rule_id for rule_id, rule in RULES.items()}


def rule_ids(names: Iterable[str]) -> list[str]:
    """Ids for rule ids or names (case-insensitive ids); an unknown one is an input error."""
    ids = []
    for name in names:
        rule_id = (
            name.strip().upper() if name.strip().upper() in RULES else _BY_NAME.get(name.strip())
        )
        if rule_id is None:
            raise LintInputError(f"unknown rule {name!r}; known: {', '.join(RULES)}")
        ids.append(rule_id)
    return ids


def selected_rules(select: Iterable[str] | None = None, ignore: Iterable[str] = ()) -> list[Rule]:
    """The rules to run, in id order: ``select`` (default all) minus ``ignore``."""
    chosen = set(rule_ids(select)) if select is not None else set(RULES)
    chosen -= set(rule_ids(ignore))
    return [rule for rule_id, rule in RULES.items() if rule_id in chosen]


def run_rules(
    lint_input: LintInput, select: Iterable[str] | None = None, ignore: Iterable[str] = ()
) -> list[Finding]:
    """Run the selected rules over ``lint_input``; findings sorted most severe first."""
    return _run(selected_rules(select, ignore), lint_input)


def lint_report(
    lint_input: LintInput, select: Iterable[str] | None = None, ignore: Iterable[str] = ()
) -> ReportDict:
    """Run the selected rules and build the versioned report, naming the rules checked."""
    rules = selected_rules(select, ignore)
    findings = _run(rules, lint_input)
    return build_report(findings, [rule.meta.id for rule in rules], lint_input.client)


def _run(rules: Iterable[Rule], lint_input: LintInput) -> list[Finding]:
    _check_rule_options(lint_input.rule_options)
    ctx = LintContext.from_input(lint_input)
    return sort_findings(finding for rule in rules for finding in rule.check(ctx))


def _check_rule_options(options: Mapping[str, Mapping[str, float]]) -> None:
    """Reject options for unknown rules or names, which would otherwise be silently ignored."""
    for rule_id, values in options.items():
        if rule_id not in RULES:
            raise LintInputError(
                f"rule_options: unknown rule {rule_id!r}; known: {', '.join(RULES)}"
            )
        known = RULES[rule_id].meta.options
        for name in values:
            if name not in known:
                expected = ", ".join(known) or "no options"
                raise LintInputError(
                    f"rule_options.{rule_id}: unknown option {name!r}; expected {expected}"
                )
