"""``make test-faults-removed``: proof that no fault test passes with its fault removed.

With ``KAFKA_EOS_TEST_REMOVE_FAULTS=1`` the harness runs every pipeline without the fault its
test names, skips its strike checks and the exit-code checks of runs that were to fail, and
skips the test's own faults (a job or broker killed, a log entry deleted: ``harness.inject``).
A test that named a fault must then fail on an assertion of its own file, about what the fault
leaves (the window's state, the decisions, Spark's logs, the output): that failure is reported
as a pass. A pass is reported as a failure, and so is any other failure (a timeout, a harness
or fixture error): it proves nothing about the fault. A test that names no fault is reported
as it is. The summary lists each fault test with the assertion that caught the missing fault.

``--faults-shard=K/N`` keeps the K-th of N shards of the collected tests (every N-th test from
the K-th, in collection order): ``make test-faults-removed-subset`` rotates K run to run.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from integration_tests.sink import harness

_caught: list[tuple[str, list[str], str]] = []
_not_caught: list[tuple[str, list[str], str]] = []


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--faults-shard",
        default=None,
        help="K/N: run the K-th (0-based) of N shards of the collected tests",
    )


@pytest.hookimpl(trylast=True)  # after -k has deselected
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    shard = config.getoption("--faults-shard")
    if shard is None:
        return
    k, n = (int(part) for part in shard.split("/"))
    assert 0 <= k < n, f"--faults-shard={shard}: K must be in 0..N-1"
    kept = [item for index, item in enumerate(items) if index % n == k]
    config.hook.pytest_deselected(items=[item for item in items if item not in kept])
    items[:] = kept


def _caught_by_the_test(item: pytest.Item, excinfo: pytest.ExceptionInfo[BaseException]) -> bool:
    """An ``AssertionError`` raised in the test's own file (its body or a helper of its file):
    not in the harness, a fixture or a library, where a timeout or a broken run fails."""
    if not excinfo.errisinstance(AssertionError):
        return False
    return Path(excinfo.traceback[-1].path) == Path(item.path)


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
    if report.failed and call.excinfo is not None:
        crash = getattr(report.longrepr, "reprcrash", None)
        first_line = crash.message.splitlines()[0] if crash else str(report.longrepr)[:200]
        if _caught_by_the_test(item, call.excinfo):
            _caught.append((item.nodeid, removed, first_line))
            report.outcome, report.longrepr = "passed", None
        else:
            _not_caught.append((item.nodeid, removed, first_line))
            report.sections.append(
                (
                    "fault removed",
                    f"without {', '.join(removed)} the test failed, but not on an assertion of "
                    f"its own file ({call.excinfo.typename} in {call.excinfo.traceback[-1].path})"
                    ": that proves nothing about the fault",
                )
            )
    else:
        report.outcome = "failed"
        report.longrepr = f"passes with its fault removed ({', '.join(removed)}): it proves nothing"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not harness.FAULTS_REMOVED:
        return
    terminalreporter.section("fault tests, each failing with its fault removed")
    for nodeid, removed, caught in _caught:
        terminalreporter.write_line(f"{nodeid}\n    without {removed[0]}: {caught}")
    if _not_caught:
        terminalreporter.section("fault tests that failed elsewhere than on their own assertions")
        for nodeid, removed, why in _not_caught:
            terminalreporter.write_line(f"{nodeid}\n    without {removed[0]}: {why}")
