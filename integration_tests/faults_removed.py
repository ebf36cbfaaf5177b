"""``make test-faults-removed``: proof that no fault test passes with its fault removed.

With ``KAFKA_EOS_TEST_REMOVE_FAULTS=1`` the harness runs every pipeline without the fault its
test names, and skips its strike checks. A test that named a fault must then fail on its own
assertions (the window's state, the exit code, the evidence in the log): that failure is
reported as a pass, and a pass as a failure. A test that names no fault is reported as it is.
The summary lists each fault test with the assertion that caught the missing fault.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from integration_tests.sink import harness

_caught: list[tuple[str, list[str], str]] = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    if not harness.FAULTS_REMOVED or call.when != "call":
        return
    report: pytest.TestReport = outcome.get_result()
    removed = list(harness.removed_faults)
    harness.removed_faults.clear()
    if not removed:
        return
    if report.failed:
        crash = getattr(report.longrepr, "reprcrash", None)
        caught = crash.message.splitlines()[0] if crash else str(report.longrepr)[:200]
        _caught.append((item.nodeid, removed, caught))
        report.outcome, report.longrepr = "passed", None
    else:
        report.outcome = "failed"
        report.longrepr = f"passes with its fault removed ({', '.join(removed)}): it proves nothing"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not harness.FAULTS_REMOVED:
        return
    terminalreporter.section("fault tests, each failing with its fault removed")
    for nodeid, removed, caught in _caught:
        terminalreporter.write_line(f"{nodeid}\n    without {removed[0]}: {caught}")
