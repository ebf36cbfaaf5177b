"""The root conftest.py's guard: with ``CI`` set, a skipped test fails the run.

Each case runs pytest on a small project whose conftest.py is the root one, as it is on disk.
"""

from __future__ import annotations

import importlib.util
import re
import textwrap
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

ROOT_CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"

SKIPS = {
    "marker": """
        import pytest

        @pytest.mark.skip(reason="no broker here")
        def test_skipped(): pass
    """,
    "skipif": """
        import pytest

        @pytest.mark.skipif(True, reason="no broker here")
        def test_skipped(): pass
    """,
    "in the test": """
        import pytest

        def test_skipped(): pytest.skip("no broker here")
    """,
    "in a fixture": """
        import pytest

        @pytest.fixture
        def kafka(): pytest.skip("no broker here")

        def test_skipped(kafka): pass
    """,
}


def run(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    ci: str | None,
    allowed: dict[str, str] | None = None,
    pytest_args: tuple[str, ...] = (),
    **modules: str,
) -> pytest.RunResult:
    conftest = ROOT_CONFTEST.read_text()
    if allowed is not None:
        conftest += f"\nALLOWED_SKIPS_IN_CI.update({allowed!r})\n"
    pytester.makeconftest(conftest)
    pytester.makepyfile(**modules)
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # hypothesis etc.: slow to load
    return pytester.runpytest("-q", *pytest_args)


@pytest.mark.parametrize("style", SKIPS)
def test_in_ci_a_skip_fails_the_run_and_is_named_with_its_reason(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, style: str
) -> None:
    result = run(pytester, monkeypatch, "true", test_a="def test_ok(): pass", test_b=SKIPS[style])
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(
        [
            "*skips not allowed in CI: the run fails*",
            "SKIPPED test_b.py::test_skipped: no broker here",
        ]
    )


@pytest.mark.parametrize("ci", [None, ""])
def test_without_ci_a_skip_is_only_a_skip(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ci: str | None
) -> None:
    result = run(pytester, monkeypatch, ci, test_b=SKIPS["in a fixture"])
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(skipped=1)
    assert "not allowed in CI" not in result.stdout.str()


def test_a_module_skipped_as_a_whole_fails_the_run_in_ci(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = "import pytest\npytest.skip('no broker here', allow_module_level=True)\n"
    result = run(pytester, monkeypatch, "1", test_a="def test_ok(): pass", test_b=module)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["SKIPPED test_b.py: no broker here"])


def test_under_two_workers_the_run_still_fails_on_a_skip(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``make`` runs the suites with pytest-xdist: a worker sees only its share of the skips,
    and its status is not the run's; the controller sees them all and sets it."""
    module = "import pytest\npytest.skip('no broker here', allow_module_level=True)\n"
    skipped = {"test_b": SKIPS["in the test"], "test_c": module}
    workers = ("-p", "xdist", "-n", "2")
    result = run(
        pytester, monkeypatch, "true", None, workers, test_a="def test_ok(): pass", **skipped
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines_random(
        ["SKIPPED test_b.py::test_skipped: no broker here", "SKIPPED test_c.py: no broker here"]
    )
    for skipping in skipped:
        (pytester.path / f"{skipping}.py").unlink()
    ok = run(pytester, monkeypatch, "true", None, workers, test_b="def test_ok(): pass")
    assert ok.ret == pytest.ExitCode.OK


def test_an_allowed_reason_passes_and_is_listed_with_why(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    allowed = {"no broker here|needs a GPU: .*": "no such hardware on CI runners"}
    gpu = "import pytest\n\ndef test_gpu(): pytest.skip('needs a GPU: cuda 12')\n"
    result = run(pytester, monkeypatch, "true", allowed, test_b=SKIPS["marker"], test_c=gpu)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "*skips allowed in CI*",
            "SKIPPED test_b.py::test_skipped: no broker here (allowed: no such hardware*)",
            "SKIPPED test_c.py::test_gpu: needs a GPU: cuda 12 (allowed: no such hardware*)",
        ]
    )


def test_an_allowed_reason_must_match_in_full(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ "no broker" must not allow "no broker here": a pattern allows exactly what it says."""
    result = run(pytester, monkeypatch, "true", {"no broker": "why"}, test_b=SKIPS["marker"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_an_xfail_is_not_a_skip(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    module = "import pytest\n\n@pytest.mark.xfail(reason='known')\ndef test_x(): assert False\n"
    result = run(pytester, monkeypatch, "true", test_b=module)
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(xfailed=1)


def test_a_failed_or_empty_run_keeps_its_own_status(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ "No tests ran" (exit 5) stays 5: make and .ci/run fail on it already."""
    assert run(pytester, monkeypatch, "true", test_b="").ret == pytest.ExitCode.NO_TESTS_COLLECTED
    failing = textwrap.dedent(SKIPS["marker"]) + "\ndef test_bad(): assert False\n"
    assert run(pytester, monkeypatch, "true", test_c=failing).ret == pytest.ExitCode.TESTS_FAILED


def test_every_allowed_reason_is_a_pattern_with_why() -> None:
    spec = importlib.util.spec_from_file_location("root_conftest", ROOT_CONFTEST)
    assert spec is not None and spec.loader is not None
    root = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(root)
    for pattern, why in root.ALLOWED_SKIPS_IN_CI.items():
        re.compile(pattern)
        assert why.strip(), pattern
