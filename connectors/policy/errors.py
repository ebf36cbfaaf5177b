"""The linter's exceptions: ``LintError`` under the project root ``KafkaEosError``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from checkpoint.errors import ConfigError, KafkaEosError
from connectors.options import OptionError

if TYPE_CHECKING:
    from connectors.policy.findings import Finding


class LintError(KafkaEosError):
    """Root of every error raised by ``connectors.policy``."""

    code = "KAFKA_EOS.LINT.INVALID_RULE"


class LintInputError(LintError, ConfigError):
    """An input could not be read or makes no sense (bad file, bad duration, bad number).

    Messages name the file or key and what was expected, never a secret value.
    """

    code = "KAFKA_EOS.LINT.INVALID_INPUT"


class LintOptionError(LintInputError, OptionError):
    """A linter flag or a pipeline file's timing key is malformed, read with the one option
    grammar (:mod:`connectors.options`)."""

    code = "KAFKA_EOS.LINT.INVALID_OPTION"
    side = "lint"


class LiveClusterError(LintError):
    """The live cluster could not be read within its deadline."""

    code = "KAFKA_EOS.CLUSTER.READ_FAILED"


class SinkConfigError(LintError, ConfigError):
    """The Kafka sink's configuration has error findings; raised at sink startup.

    A ``ConfigError`` too, so callers handling the project's config errors catch it. The
    message lists every error finding with its rule id and fix, so the job log alone
    says what to change.
    """

    code = "KAFKA_EOS.SINK.CONFIG_REJECTED"

    def __init__(self, findings: Sequence[Finding]) -> None:
        self.findings: tuple[Finding, ...] = tuple(findings)
        lines = [f"{len(self.findings)} exactly-once configuration error(s):"]
        for finding in self.findings:
            lines.append(f"  {finding.rule}: {finding.message}")
            lines.append(f"    fix: {finding.fix}")
        super().__init__("\n".join(lines))
