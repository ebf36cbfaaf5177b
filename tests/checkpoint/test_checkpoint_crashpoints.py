"""Fault points: the fault-matrix tests trust them to strike exactly where and when named.

A fault point that fired at the wrong checkpoint or hit, or did not fire at all, would let a
crash test pass without ever crashing. ``kill`` is tested in child processes in sessions of
their own, since it kills the whole process group.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from checkpoint import crashpoints
from checkpoint.crashpoints import InjectedFault, checkpoint_scope, crash_point

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


def test_raise_names_the_point_and_the_checkpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    arm(monkeypatch, f"{POINT}:raise")
    with pytest.raises(InjectedFault, match=rf"fault injected at {POINT} \(checkpoint 3\)"):
        crash_point(POINT, checkpoint_id=3)


def test_only_the_named_point_fires(monkeypatch: pytest.MonkeyPatch) -> None:
    arm(monkeypatch, f"{POINT}:raise")
    assert not fires("driver.after_commit")
    assert not fires("driver.before")  # a prefix of the name is another point
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
    assert sorted(p.name for p in hits.iterdir()) == [f"{POINT}.{n}" for n in (1, 2, 3)]
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


def test_kill_after_sleeps_then_kills() -> None:
    started = time.monotonic()
    returncode, stdout = run_child(f"{POINT}:kill-after=0.5", CHILD)
    assert returncode == -signal.SIGKILL
    assert stdout == "before\n"
    assert time.monotonic() - started >= 0.5


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
