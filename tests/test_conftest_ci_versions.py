"""What CI claims about Kafka: every version label it lists ran (the root conftest.py's
``--kafka-versions-must-run``), on Docker's images (``selected_mode`` with ``CI`` set).

The guard's cases run pytest on a small project whose conftest.py is the root one, as on disk.
"""

from __future__ import annotations

import pytest

from integration_tests import kafka_containers, kafka_fixtures
from tests.test_conftest_ci_skips import ROOT_CONFTEST

pytest_plugins = ["pytester"]

LABELLED = """
    import pytest

    @pytest.mark.parametrize("v", ["4.3.1", "3.9.2-nv", "4.3.1-tv1"], ids=lambda v: f"kafka-{v}")
    def test_on(v): assert v != "3.9.2-nv"

    @pytest.mark.parametrize("flag", [True])
    @pytest.mark.parametrize("v", ["3.5.2"], ids=lambda v: f"kafka-{v}")
    def test_combined(v, flag): pass
"""


def run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, *args: str) -> pytest.RunResult:
    pytester.makeconftest(ROOT_CONFTEST.read_text())
    pytester.makepyfile(test_labels=LABELLED)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    return pytester.runpytest("-q", *args)


def test_a_required_label_with_no_passing_test_fails_a_run_that_passed(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run(
        pytester, monkeypatch, "-k", "not 3.9.2-nv", "--kafka-versions-must-run=4.3.1,3.9.2"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["kafka-3.9.2: 0", "*no test passed on 3.9.2;*"])


def test_under_two_workers_the_controller_counts_every_workers_passes(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each worker runs a share of the labels; only the controller sees them all."""
    workers = ("-p", "xdist", "-n", "2")
    green = run(
        pytester,
        monkeypatch,
        *workers,
        "-k",
        "not 3.9.2-nv",
        "--kafka-versions-must-run=4.3.1,3.5.2",
    )
    assert green.ret == pytest.ExitCode.OK
    green.stdout.fnmatch_lines(
        ["bringing up nodes*", "*kafka-3.5.2: 1", "kafka-4.3.1: 1", "kafka-4.3.1-tv1: 1"]
    )
    red = run(pytester, monkeypatch, *workers, "-k", "not 3.9.2", "--kafka-versions-must-run=3.9.2")
    assert red.ret == pytest.ExitCode.TESTS_FAILED
    red.stdout.fnmatch_lines(["*no test passed on 3.9.2;*"])


def test_a_variant_label_does_not_count_for_its_release_nor_a_failed_test_for_its_label(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run(pytester, monkeypatch, "--kafka-versions-must-run=3.9.2,3.9.2-nv,4.3.1-tv1")
    result.stdout.fnmatch_lines(
        ["kafka-3.9.2: 0", "kafka-3.9.2-nv: 0", "kafka-4.3.1-tv1: 1", "*on 3.9.2, 3.9.2-nv;*"]
    )


def test_every_required_label_that_passed_keeps_the_run_green(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run(
        pytester,
        monkeypatch,
        "-k",
        "not 3.9.2-nv",
        "--kafka-versions-must-run=4.3.1,4.3.1-tv1,3.5.2",
    )
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["kafka-3.5.2: 1", "kafka-4.3.1: 1", "kafka-4.3.1-tv1: 1"])


@pytest.mark.parametrize(
    ("env", "docker_up", "mode"),
    [
        ({}, False, "process"),  # no engine: the fall-back
        ({"KAFKA_EOS_KAFKA_MODE": "process"}, True, "process"),
        ({"KAFKA_BOOTSTRAP_SERVERS": "localhost:9092"}, True, "external"),
    ],
)
def test_in_ci_clusters_run_in_docker_or_the_tests_fail(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], docker_up: bool, mode: str
) -> None:
    for key in ("KAFKA_EOS_KAFKA_MODE", "KAFKA_BOOTSTRAP_SERVERS", "CI"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(kafka_containers, "docker_engine_reachable", lambda: docker_up)
    assert kafka_fixtures.selected_mode() == mode
    monkeypatch.setenv("CI", "true")
    with pytest.raises(RuntimeError, match=f"would run in {mode} mode: CI runs them in Docker"):
        kafka_fixtures.selected_mode()


def test_in_ci_docker_mode_is_selected(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("KAFKA_EOS_KAFKA_MODE", "KAFKA_BOOTSTRAP_SERVERS"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setattr(kafka_containers, "docker_engine_reachable", lambda: True)
    monkeypatch.setenv("CI", "true")
    assert kafka_fixtures.selected_mode() == "docker"
