"""Exactly-once configuration policy: transaction timeouts, idempotence, isolation, durability.

The rules (``rules/``, one module each, discovered by ``registry``) are enforced by the Kafka
sink at startup (``sink_checks``) and reported by ``kafka-eos lint``, whose front end
(``kafka_eos.lint``: file loaders, rendering) reads this package, never the other way round.
Build a ``LintInput`` (directly or with ``kafka_eos.lint.loaders``), ``run_rules`` it, and
print ``build_report`` with ``kafka_eos.lint.render``. Cluster facts come from
``connectors.kafka.cluster_facts`` (confluent-kafka), imported only by callers that read one.
"""

from connectors.policy.client_keys import CLIENTS, DEFAULT_CLIENT, Client
from connectors.policy.errors import LintError, LintInputError, LiveClusterError, SinkConfigError
from connectors.policy.findings import (
    Finding,
    FindingDict,
    ReportDict,
    Severity,
    SummaryDict,
    build_report,
)
from connectors.policy.inputs import ClusterFacts, ConsumerInput, LintInput, Timing, TopicFacts
from connectors.policy.registry import RULES, lint_report, run_rules
from connectors.policy.sink_checks import (
    SINK_RULES,
    check_sink_config,
    raise_for_errors,
)

__all__ = [
    "CLIENTS",
    "DEFAULT_CLIENT",
    "RULES",
    "SINK_RULES",
    "Client",
    "ClusterFacts",
    "ConsumerInput",
    "Finding",
    "FindingDict",
    "LintError",
    "LintInput",
    "LintInputError",
    "LiveClusterError",
    "ReportDict",
    "Severity",
    "SinkConfigError",
    "SummaryDict",
    "Timing",
    "TopicFacts",
    "build_report",
    "check_sink_config",
    "lint_report",
    "raise_for_errors",
    "run_rules",
]
