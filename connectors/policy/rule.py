"""What every rule module declares: ``RULE = RuleMeta(...)`` plus ``check(ctx)``.

The module docstring is the rule's documentation (what, why, what breaks, the fix, PASS
and FAIL examples, a source link); ``docgen`` turns it into ``docs/lint/<ID>.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from connectors.kafka_keys import SOURCE
from connectors.policy.connector_models import SOURCE_NAME
from connectors.policy.context import LintContext, Setting
from connectors.policy.findings import Finding, Severity


@dataclass(frozen=True)
class RuleMeta:
    """A rule's stable identity. ``id`` never changes meaning once released."""

    id: str
    name: str
    severity: Severity
    options: Mapping[str, float] = field(default_factory=dict)

    @property
    def doc_path(self) -> str:
        return f"docs/lint/{self.id}.md"

    def option(self, ctx: LintContext, name: str) -> float:
        """Option ``name``: the input's ``rule_options`` override, else the declared default."""
        return ctx.input.rule_options.get(self.id, {}).get(name, self.options[name])

    def finding(
        self,
        message: str,
        *,
        settings: Iterable[Setting],
        fix: str,
        keys: Iterable[str] = (),
        severity: Severity | None = None,
    ) -> Finding:
        """A finding of this rule naming every setting looked at, plus ``keys`` left unset.

        ``severity="info"`` marks what the rule could not check (a topic the live cluster
        lacks), so that is reported rather than silently skipped, without failing a build.
        """
        seen = tuple(settings)
        return Finding(
            rule=self.id,
            severity=severity or self.severity,
            message=message,
            keys=tuple(dict.fromkeys([*(s.key for s in seen), *keys])),
            values={s.key: s.value for s in seen},
            fix=fix,
        )

    def missing_topic(
        self, ctx: LintContext, role: str, name: str, unchecked: str, fix: str
    ) -> Iterator[Finding]:
        """This rule's ``info`` finding for the ``role`` (source, output) topic ``name`` when
        the live cluster reported it missing: ``unchecked`` says what that left unchecked."""
        if ctx.topic_missing(name):
            yield self.finding(
                f"{role} topic {name} does not exist on the cluster, so {unchecked}",
                settings=(Setting("cluster", "topic", name),),
                fix=fix,
                severity="info",
            )

    def refused_source_option(
        self, ctx: LintContext, key: str, consequence: str = ""
    ) -> Iterator[Finding]:
        """This rule's finding for ``kafka.<key>`` in the source section, which the kafka-eos
        source refuses at startup; ``consequence`` says what its forced value guarantees."""
        rejected = ctx.rejected_source_option(key)
        if rejected is None:
            return
        yield self.finding(
            f"{rejected}: {SOURCE_NAME} refuses this option and does not start"
            f" (it forces {key}={SOURCE.forced[key]}{consequence})",
            settings=(rejected,),
            fix=f"remove {rejected.key}: {SOURCE.refused[key]}",
        )


Check = Callable[[LintContext], Iterator[Finding]]


@dataclass(frozen=True)
class Rule:
    """A registered rule: its identity, its check, and its documentation."""

    meta: RuleMeta
    check: Check
    doc: str
    module: str

    @property
    def summary(self) -> str:
        """The doc's first line: the one-liner of the rule table."""
        return self.doc.splitlines()[0].strip()
