"""Exactly-once configuration linter: transaction timeouts, idempotence, isolation, durability.

Used by ``kafka-eos lint`` and by the Kafka sink's startup checks. Build a ``LintInput``
(directly or with ``loaders``), ``run_rules`` it, and print ``build_report`` with
``render``. ``live`` (confluent-kafka) is imported only by callers that read a cluster.
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
    checked_sink_config,
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
    "checked_sink_config",
    "lint_report",
    "raise_for_errors",
    "run_rules",
]
