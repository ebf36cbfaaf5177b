"""CI holds what it claims. With ``CI`` set (``.ci/run`` sets it), a skipped test fails the
run; and with ``--kafka-versions-must-run``, so does a Kafka version label that no passing test
carried.

A skip in CI is a test that claims nothing and still lets ``make test`` pass: a fixture that
found no Docker engine, a cluster that cannot be stopped. So each skipped test is listed with
its node id and reason, and the run's exit status becomes 1 (tests failed), unless the reason
fully matches a pattern of :data:`ALLOWED_SKIPS_IN_CI`; skips that were allowed are listed
too. Without ``CI`` a skip is only a skip. xfails are not skips and are left alone.

PASS (``CI=true``)::

    def test_a(): pass

FAIL (``CI=true``; allowed without it)::

    def test_b(): pytest.skip("cannot stop a node of an external cluster")
"""

from __future__ import annotations

import os
import re

import pytest

# Skip reasons (patterns, matched in full) that may happen in CI, each with why. Keep it short:
# every entry is a test that CI does not run.
#
# Deliberately not listed: the three skips in integration_tests/kafka_fixtures.py ("cannot
# stop/start a node of an external cluster", "this test sets broker properties or node counts:
# needs its own cluster"). They only happen with an external cluster, which CI never uses:
# .ci/run unsets KAFKA_BOOTSTRAP_SERVERS and KAFKA_EOS_KAFKA_MODE, and the Makefile starts the
# Docker engine. In CI they would mean that the broker-failure tests did not run.
ALLOWED_SKIPS_IN_CI: dict[str, str] = {}


def _reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    if isinstance(report.longrepr, tuple):  # (path, line, "Skipped: <reason>")
        return report.longrepr[2].removeprefix("Skipped: ")
    return str(report.longrepr)


def _allowed(reason: str) -> str | None:
    """Why a skip with this reason is allowed in CI, or None."""
    for pattern, why in ALLOWED_SKIPS_IN_CI.items():
        if re.fullmatch(pattern, reason):
            return why
    return None


class SkipGuard:
    """Records every skip of the session; fails a passing run that skipped what CI must run."""

    def __init__(self) -> None:
        self.allowed: list[tuple[str, str, str]] = []
        self.disallowed: list[tuple[str, str]] = []

    def _record(self, report: pytest.TestReport | pytest.CollectReport) -> None:
        # A skipped report with ``wasxfail`` is an xfail, not a skip.
        if not report.skipped or hasattr(report, "wasxfail"):
            return
        reason = _reason(report)
        why = _allowed(reason)
        if why is None:
            self.disallowed.append((report.nodeid, reason))
        else:
            self.allowed.append((report.nodeid, reason, why))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self._record(report)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """A module skipped as a whole (``allow_module_level``, ``importorskip``) is a skip."""
        self._record(report)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        # Only a passing run becomes a failure: a failed, interrupted or empty run (exit 5,
        # "no tests ran") keeps its own status, which is a failure already.
        if self.disallowed and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.allowed:
            terminalreporter.section("skips allowed in CI (ALLOWED_SKIPS_IN_CI in conftest.py)")
            for nodeid, reason, why in self.allowed:
                terminalreporter.line(f"SKIPPED {nodeid}: {reason} (allowed: {why})")
        if self.disallowed:
            terminalreporter.section("skips not allowed in CI: the run fails", red=True)
            for nodeid, reason in self.disallowed:
                terminalreporter.line(f"SKIPPED {nodeid}: {reason}", red=True)
            terminalreporter.line(
                "CI is set, and a skipped test is a test that did not run. Make it run, or add "
                "its reason, with why, to ALLOWED_SKIPS_IN_CI in conftest.py.",
                red=True,
            )


# A Kafka version label in a test id: ``[kafka-4.3.1]``, ``[kafka-4.3.1-tv1-nv]``,
# ``[kafka-3.9.2-True]`` (integration_tests/kafka_fixtures.py names the labels).
_KAFKA_LABEL = re.compile(r"\bkafka-(\d+\.\d+\.\d+(?:-tv\d+)?(?:-nv)?)(?=[\]-])")


class VersionGuard:
    """Fails a passing run in which a required Kafka version label carried no passing test:
    a parametrisation dropped, or a version's tests deselected, would otherwise go unseen."""

    def __init__(self, required: list[str]) -> None:
        self.required = required
        self.passed: dict[str, int] = dict.fromkeys(required, 0)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" and report.passed:
            for label in _KAFKA_LABEL.findall(report.nodeid):
                self.passed[label] = self.passed.get(label, 0) + 1

    def missing(self) -> list[str]:
        return [label for label in self.required if not self.passed[label]]

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.missing() and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        terminalreporter.section("passed tests per Kafka version label")
        for label, count in sorted(self.passed.items()):
            terminalreporter.line(f"kafka-{label}: {count}")
        if self.missing():
            terminalreporter.line(
                f"--kafka-versions-must-run: no test passed on {', '.join(self.missing())}; "
                "the run fails. Run those versions' tests, or drop the version from the list "
                "(the Makefile's KAFKA_VERSIONS).",
                red=True,
            )


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--kafka-versions-must-run",
        default="",
        metavar="LABELS",
        help="comma-separated Kafka version labels: the run fails unless a test carrying "
        "each label passed",
    )


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("CI"):
        config.pluginmanager.register(SkipGuard(), "kafka-eos-ci-skip-guard")
    required = [v for v in config.getoption("kafka_versions_must_run").split(",") if v]
    if required:
        config.pluginmanager.register(VersionGuard(required), "kafka-eos-version-guard")
