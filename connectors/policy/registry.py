"""The single registry of rules, and ``run_rules``: the one way findings are produced.

Rules are selected by id (``EOS001``) or name (``transaction-timeout-above-broker-max``);
ids are stable, so CI configs that name them keep working.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping
from types import MappingProxyType, ModuleType

from connectors.policy.context import LintContext
from connectors.policy.errors import LintInputError
from connectors.policy.findings import Finding, ReportDict, build_report, sort_findings
from connectors.policy.inputs import LintInput
from connectors.policy.rule import Rule
from connectors.policy.rules import (
    eos001_transaction_timeout_above_broker_max,
    eos002_transaction_timeout_too_short,
    eos003_transaction_timeout_stalls_readers,
    eos004_delivery_timeout_above_transaction_timeout,
    eos005_socket_timeout_vs_transaction_timeout,
    eos006_linger_vs_delivery_timeout,
    eos007_idempotence_bundle,
    eos008_transactional_id_unstable,
    eos009_transactional_id_expiration,
    eos010_transaction_state_log_replication,
    eos011_output_topic_durability,
    eos012_consumer_not_read_committed,
    eos013_source_auto_commit,
    eos014_source_offset_reset_skips,
    eos015_source_retention_shorter_than_checkpoint_age,
    eos016_max_poll_interval_below_batch,
    eos017_unbounded_first_batch,
)

_MODULES: tuple[ModuleType, ...] = (
    eos001_transaction_timeout_above_broker_max,
    eos002_transaction_timeout_too_short,
    eos003_transaction_timeout_stalls_readers,
    eos004_delivery_timeout_above_transaction_timeout,
    eos005_socket_timeout_vs_transaction_timeout,
    eos006_linger_vs_delivery_timeout,
    eos007_idempotence_bundle,
    eos008_transactional_id_unstable,
    eos009_transactional_id_expiration,
    eos010_transaction_state_log_replication,
    eos011_output_topic_durability,
    eos012_consumer_not_read_committed,
    eos013_source_auto_commit,
    eos014_source_offset_reset_skips,
    eos015_source_retention_shorter_than_checkpoint_age,
    eos016_max_poll_interval_below_batch,
    eos017_unbounded_first_batch,
)


def _rule(module: ModuleType) -> Rule:
    return Rule(
        meta=module.RULE,
        check=module.check,
        doc=inspect.cleandoc(module.__doc__ or ""),
        module=module.__name__,
    )


RULES: Mapping[str, Rule] = MappingProxyType({rule.meta.id: rule for rule in map(_rule, _MODULES)})
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
