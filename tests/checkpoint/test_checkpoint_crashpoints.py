"""Fault points: the fault-matrix tests trust them to strike exactly where and when named.

A fault point that fired at the wrong checkpoint or hit, or did not fire at all, would let a
crash test pass without ever crashing. ``kill`` is tested in child processes in sessions of
their own, since it kills the whole process group.
"""

from __future__ import annotations

import ast
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from checkpoint import crashpoints
from checkpoint.crashpoints import (
    CrashPoint,
    CrashSpec,
    InjectedFault,
    UnknownCrashPoint,
    checkpoint_scope,
    crash_point,
    parse_spec,
)

PROJECT_ROOT = Path(__file__).resolve().parents[2]
POINT = "driver.before_decision"


@pytest.fixture(autouse=True)
def isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    """No fault spec, a fresh hit counter and scope stack: tests must not see each other's
    hits, nor a spec set by whoever runs the suite."""
    for name in (crashpoints.ENV, crashpoints.PGID_ENV, crashpoints.HITS_DIR_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(crashpoints, "_hits", Counter())
    monkeypatch.setattr(crashpoints, "_scope", [])


def arm(monkeypatch: pytest.MonkeyPatch, spec: str) -> None:
    monkeypatch.setenv(crashpoints.ENV, spec)


def fires(name: str = POINT, checkpoint_id: int | None = None) -> bool:
    """Whether a ``raise`` fault point fired."""
    try:
        crash_point(name, checkpoint_id=checkpoint_id)
    except InjectedFault:
        return True
    return False


def test_unset_is_a_no_op() -> None:
    assert not fires(checkpoint_id=3)


def test_a_malformed_spec_fails_instead_of_never_firing(monkeypatch: pytest.MonkeyPatch) -> None:
    arm(monkeypatch, f"{POINT}:explode")
    with pytest.raises(ValueError, match="explode"):
        crashpoints.crash_point(POINT)


# --- the registry: a name that is not a CrashPoint is an error, never a point that never fires


def test_every_point_says_which_moment_it_marks() -> None:
    for point in CrashPoint:
        assert point.moment and "\n" not in point.moment, point
        assert point.moment != point.value, point


@pytest.mark.parametrize(
    "spec", ["driver.before_end_tx@1#1", "driver.before:raise", "before_decision", "x.y:kill"]
)
def test_an_unknown_name_in_the_spec_is_named_with_the_known_ones(spec: str) -> None:
    """A renamed point would otherwise turn its crash tests into tests that never crash."""
    with pytest.raises(UnknownCrashPoint) as raised:
        parse_spec(spec)
    message = str(raised.value)
    unknown = spec.split("@")[0].split("#")[0].split(":")[0]
    assert f"unknown crash point {unknown!r} in {crashpoints.ENV}={spec!r}" in message
    assert all(point.value in message for point in CrashPoint)
    assert isinstance(raised.value, ValueError)


def test_an_unknown_name_in_the_spec_fails_at_the_first_point_reached(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Not only at the misspelt point, which is never reached: the job fails at once."""
    arm(monkeypatch, "driver.before_end_tx@1#1")
    with pytest.raises(UnknownCrashPoint, match=r"'driver\.before_end_tx'"):
        crash_point("task.begin", checkpoint_id=1)


@pytest.mark.parametrize("armed", [False, True])
def test_an_unregistered_name_at_a_call_site_is_a_programming_error(
    monkeypatch: pytest.MonkeyPatch, armed: bool
) -> None:
    """Armed or not, so that any unit test that runs the call site catches the rename."""
    if armed:
        arm(monkeypatch, f"{POINT}:raise")
    with pytest.raises(UnknownCrashPoint, match=r"'driver\.before' passed to crash_point\(\)"):
        crash_point("driver.before")  # a prefix of a name is not a point


def test_the_member_and_its_name_are_the_same_point(monkeypatch: pytest.MonkeyPatch) -> None:
    arm(monkeypatch, f"{POINT}:raise")
    assert fires(CrashPoint.DRIVER_BEFORE_DECISION)
    assert CrashPoint(POINT) is CrashPoint.DRIVER_BEFORE_DECISION


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [
        (POINT, CrashSpec(CrashPoint.DRIVER_BEFORE_DECISION)),
        (
            "driver.before_end_txn@1#2:raise",
            CrashSpec(CrashPoint.DRIVER_BEFORE_END_TXN, checkpoint_id=1, hit=2, action="raise"),
        ),
        (
            "task.begin@1:stall-until=/tmp/go",
            CrashSpec(CrashPoint.TASK_BEGIN, checkpoint_id=1, action="stall-until=/tmp/go"),
        ),
    ],
)
def test_parse_spec(raw: str, parsed: CrashSpec) -> None:
    assert parse_spec(raw) == parsed


def _python_files(*folders: str) -> Iterator[tuple[str, ast.Module]]:
    for folder in folders:
        for path in sorted((PROJECT_ROOT / folder).rglob("*.py")):
            yield str(path.relative_to(PROJECT_ROOT)), ast.parse(path.read_text(), str(path))


def _called_points() -> dict[str, str]:
    """Where protocol code calls ``crash_point``: {place: name}; the name as written."""
    called: dict[str, str] = {}
    for path, tree in _python_files("checkpoint", "connectors", "kafka_eos"):
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            func = node.func
            if getattr(func, "id", getattr(func, "attr", None)) != "crash_point":
                continue
            arg, place = node.args[0], f"{path}:{node.lineno}"
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                called[place] = arg.value
            elif isinstance(arg, ast.Attribute) and getattr(arg.value, "id", "") == "CrashPoint":
                member = CrashPoint.__members__.get(arg.attr)
                called[place] = member.value if member else f"CrashPoint.{arg.attr}"
            else:
                called[place] = f"<not a literal: {ast.unparse(arg)}>"
    return called


def test_every_call_site_names_a_registered_point_and_every_point_is_called() -> None:
    called = _called_points()
    unknown = {place: name for place, name in called.items() if name not in set(CrashPoint)}
    assert unknown == {}, "crash_point() calls with names CrashPoint does not register"
    never_called = set(CrashPoint) - set(called.values())
    assert never_called == set(), "CrashPoint members that no protocol code marks"


_ROLES = "|".join(sorted({point.value.split(".")[0] for point in CrashPoint}))
_LOOKS_LIKE_A_SPEC = re.compile(rf"(?:{_ROLES})\.\w+")


def _armed_specs() -> dict[str, str]:
    """Fault specs written in the integration tests and the demo: {place: spec}; only the
    name for the literal head of an f-string, whose tail is computed."""
    specs: dict[str, str] = {}
    for path, tree in _python_files("integration_tests", "kafka_eos"):
        heads = {
            id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr)
            for part in node.values
        }  # fmt: skip
        for node in ast.walk(tree):
            if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
                continue
            spec = _LOOKS_LIKE_A_SPEC.match(node.value)
            if spec:
                whole = id(node) not in heads
                specs[f"{path}:{node.lineno}"] = node.value if whole else spec[0]
    return specs


def test_every_spec_the_integration_tests_arm_is_valid_and_every_point_is_armed() -> None:
    """Checked here, without a broker: a fault test whose spec names no point never crashes,
    and a point that no fault test arms is a moment whose crash nobody has tested."""
    invalid: dict[str, str] = {}
    armed: set[CrashPoint] = set()
    for place, spec in _armed_specs().items():
        try:
            armed.add(parse_spec(spec).point)
        except ValueError as error:
            invalid[place] = str(error)
    assert invalid == {}
    assert set(CrashPoint) - armed == set(), "crash points that no integration test arms"


def test_raise_names_the_point_and_the_checkpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    arm(monkeypatch, f"{POINT}:raise")
    with pytest.raises(InjectedFault, match=rf"fault injected at {POINT} \(checkpoint 3\)"):
        crash_point(POINT, checkpoint_id=3)


def test_only_the_named_point_fires(monkeypatch: pytest.MonkeyPatch) -> None:
    arm(monkeypatch, f"{POINT}:raise")
    assert not fires("driver.after_commit")
    assert fires(POINT)


def test_at_id_fires_only_at_that_checkpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    arm(monkeypatch, f"{POINT}@2:raise")
    assert not fires(checkpoint_id=1)
    assert not fires(checkpoint_id=None)  # unknown checkpoint: not the one named
    assert not fires(checkpoint_id=12)
    assert fires(checkpoint_id=2)


def test_hit_fires_only_at_that_hit(monkeypatch: pytest.MonkeyPatch) -> None:
    arm(monkeypatch, f"{POINT}#2:raise")
    assert [fires() for _ in range(4)] == [False, True, False, False]


def test_hits_count_only_at_the_named_checkpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    arm(monkeypatch, f"{POINT}@5#2:raise")
    outcomes = [fires(checkpoint_id=i) for i in (4, 5, 4, 4, 5, 5)]
    assert outcomes == [False, False, False, False, True, False]


def test_hits_are_counted_per_point(monkeypatch: pytest.MonkeyPatch) -> None:
    arm(monkeypatch, f"{POINT}#1:raise")
    crash_point("task.after_pre_commit")
    assert crashpoints._hits["task.after_pre_commit"] == 0  # not armed: not counted
    assert fires()


def test_hits_dir_counts_across_processes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Spark may run each task attempt in a new Python worker: "the second hit" is job-wide."""
    hits = tmp_path / "hits"
    arm(monkeypatch, f"{POINT}#2:raise")
    monkeypatch.setenv(crashpoints.HITS_DIR_ENV, str(hits))
    assert not fires()  # hit 1, in this process
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            f"from checkpoint.crashpoints import crash_point; crash_point({POINT!r})",
        ],
        cwd=PROJECT_ROOT,
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert child.returncode == 1 and "InjectedFault" in child.stderr  # hit 2, in another
    assert not fires()  # hit 3
    assert sorted(p.name for p in hits.iterdir()) == [
        *(f"{POINT}.{n}" for n in (1, 2, 3)),
        f"struck-{POINT}",  # the second hit struck
    ]
    assert crashpoints._hits[POINT] == 0  # the in-process counter was not used


def test_stall_sleeps_and_returns(monkeypatch: pytest.MonkeyPatch) -> None:
    arm(monkeypatch, f"{POINT}:stall=0.2")
    started = time.monotonic()
    crash_point(POINT)
    assert time.monotonic() - started >= 0.2


def test_scope_names_the_checkpoint_for_code_that_does_not_know_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    arm(monkeypatch, "driver.before_end_txn@7:raise")
    with checkpoint_scope(7):
        with pytest.raises(InjectedFault, match=r"\(checkpoint 7\)"):
            crash_point("driver.before_end_txn")
        with checkpoint_scope(8):
            assert not fires("driver.before_end_txn")  # the innermost scope counts
        assert fires("driver.before_end_txn")
        assert not fires("driver.before_end_txn", checkpoint_id=8)  # explicit id wins
    assert not fires("driver.before_end_txn")  # scope left: checkpoint unknown again
    assert crashpoints._scope == []


def test_scope_is_left_on_an_exception() -> None:
    with pytest.raises(RuntimeError), checkpoint_scope(4):
        raise RuntimeError("commit failed")
    assert crashpoints._scope == []


# --- kill: in child processes, each in a session (process group) of its own -----------------


def run_child(spec: str, code: str, extra_env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run ``code`` with the fault spec set; return its exit status and stdout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_EOS_CRASH")}
    env.update({crashpoints.ENV: spec, **(extra_env or {})})
    child = subprocess.run(
        [sys.executable, "-c", code],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        start_new_session=True,  # the kill takes the child's group, never pytest's
    )
    return child.returncode, child.stdout


CHILD = (
    "from checkpoint.crashpoints import crash_point\n"
    "print('before', flush=True)\n"
    f"crash_point({POINT!r}, checkpoint_id=3)\n"
    "print('survived', flush=True)\n"
)


@pytest.mark.parametrize("spec", [POINT, f"{POINT}:kill", f"{POINT}@3#1:kill"])
def test_kill_is_a_kill_9_of_the_process(spec: str) -> None:
    returncode, stdout = run_child(spec, CHILD)
    assert returncode == -signal.SIGKILL
    assert stdout == "before\n"  # nothing after the point ran


def test_kill_at_another_checkpoint_does_not_fire() -> None:
    assert run_child(f"{POINT}@4", CHILD) == (0, "before\nsurvived\n")


def test_kill_takes_down_the_process_group_named_by_the_job() -> None:
    """A crash in a Spark worker must take the driver (another group) down with it."""
    job = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        returncode, _ = run_child(POINT, CHILD, {crashpoints.PGID_ENV: str(job.pid)})
        assert returncode == -signal.SIGKILL
        assert job.wait(timeout=10) == -signal.SIGKILL
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()


def test_kill_jvm_without_a_jvm_above_refuses_to_pass_for_an_executor_loss(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    arm(monkeypatch, f"{POINT}:kill-jvm")
    with pytest.raises(RuntimeError, match=f"{POINT}: kill-jvm found no JVM"):
        crash_point(POINT)


def test_kill_jvm_kills_the_jvm_that_runs_this_worker(tmp_path: Path) -> None:
    """A JVM starts a Python child, as a Spark executor starts its Python workers; the
    child's fault point must take down that JVM (SIGKILL) and itself."""
    launcher = tmp_path / "Executor.java"
    launcher.write_text(
        "public class Executor { public static void main(String[] a) throws Exception {\n"
        "  Process worker = new ProcessBuilder(a).inheritIO().start();\n"
        "  worker.waitFor(); Thread.sleep(60000); } }\n"
    )
    code = f"from checkpoint.crashpoints import crash_point; crash_point({POINT!r})"
    env = {**os.environ, crashpoints.ENV: f"{POINT}:kill-jvm"}
    jvm = subprocess.run(
        ["java", str(launcher), sys.executable, "-c", code],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert jvm.returncode == -signal.SIGKILL, jvm.stderr


def test_a_strike_leaves_its_marker_and_a_point_that_does_not_fire_leaves_none(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The integration tests assert the marker, so a fault that never fired fails them."""
    from checkpoint.crashpoints import HITS_DIR_ENV, struck_marker

    monkeypatch.setenv(HITS_DIR_ENV, str(tmp_path))
    monkeypatch.setenv("KAFKA_EOS_CRASH_AT", "driver.before_end_txn@2:raise")
    crash_point(CrashPoint.DRIVER_BEFORE_END_TXN, checkpoint_id=1)  # another batch
    assert not os.path.exists(struck_marker(str(tmp_path), CrashPoint.DRIVER_BEFORE_END_TXN))
    with pytest.raises(InjectedFault):
        crash_point(CrashPoint.DRIVER_BEFORE_END_TXN, checkpoint_id=2)
    assert os.path.exists(struck_marker(str(tmp_path), CrashPoint.DRIVER_BEFORE_END_TXN))
