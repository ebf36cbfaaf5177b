"""Named fault points, for the tests that break the pipeline at the worst moment.

Protocol code marks the moments where a failure is most dangerous with ``crash_point(name)``.
Every name is registered in :class:`CrashPoint`, with the moment it marks: a name that is not
registered is an error, both at the call (a programming error) and in the spec below (a typo
or a renamed point), because an unknown name would never fire and a crash test would pass
without crashing. A new fault point is a new :class:`CrashPoint` member first.

A fault point does nothing unless ``KAFKA_EOS_CRASH_AT`` is set to
``<name>[@<checkpoint id>][#<hit>][:<action>]`` (:func:`parse_spec`), where the action is

- ``kill`` (the default): SIGKILL the process group named by ``KAFKA_EOS_CRASH_PGID`` (the
  job's, so a crash in a Spark worker takes the driver and its JVM down too; Spark starts
  workers in groups of their own), else this process's group: a ``kill -9`` of the job.
  Nothing is flushed or closed, so the test sees exactly what a real crash leaves behind;
- ``raise``: raise :class:`InjectedFault` here, as a failing task or call would;
- ``stall=<seconds>``: sleep, as a slow batch, a GC pause or a hung call would;
- ``stall-until=<path>``: sleep until the file ``path`` exists (at most 10 minutes): a
  handshake, so that a test acts while the process is held at this point, however slow the
  machine;
- ``kill-jvm``: SIGKILL the nearest JVM among this process's ancestors, then this process.
  In a Spark Python worker that JVM is its executor: an executor lost with everything in it,
  while the driver lives on (with ``local-cluster``, where executors are JVMs of their own).

>>> crash_point(CrashPoint.DRIVER_BEFORE_DECISION, checkpoint_id=3)  # unset: a no-op
>>> parse_spec("driver.before_end_txn@1#1").point is CrashPoint.DRIVER_BEFORE_END_TXN
True
>>> parse_spec("driver.before_end_tx@1")  # doctest: +ELLIPSIS
Traceback (most recent call last):
checkpoint.crashpoints.UnknownCrashPoint: [KAFKA_EOS.TESTING.UNKNOWN_CRASH_POINT] unknown ...
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from typing import NoReturn

from checkpoint.errors import KafkaEosError

ENV = "KAFKA_EOS_CRASH_AT"
PGID_ENV = "KAFKA_EOS_CRASH_PGID"
HITS_DIR_ENV = "KAFKA_EOS_CRASH_HITS_DIR"
_SPEC = re.compile(
    r"(?P<name>[\w.]+)(?:@(?P<id>\d+))?(?:#(?P<hit>\d+))?"
    r"(?::(?P<action>kill|kill-jvm|raise|stall=[\d.]+|stall-until=/\S+))?"
)
_hits: Counter[str] = Counter()
_scope: list[int] = []


class CrashPoint(StrEnum):
    """The registry of fault points, in protocol order (steps as in
    :mod:`checkpoint.two_phase_commit`). The value is the name that ``KAFKA_EOS_CRASH_AT`` and
    ``crash_point`` use, a stable code: tests and runbooks name it; ``moment`` says where it is.
    """

    moment: str

    def __new__(cls, name: str, moment: str) -> CrashPoint:
        point = str.__new__(cls, name)
        point._value_ = name
        point.moment = moment
        return point

    TASK_BEGIN = (
        "task.begin",
        "a task starts batch N, before it opens a transaction (a replay's tasks too)",
    )
    TASK_BEFORE_PRE_COMMIT = (
        "task.before_pre_commit",
        "a task produced its input into an open transaction, before the flush and pre-commit",
    )
    TASK_AFTER_PRE_COMMIT = (
        "task.after_pre_commit",
        "a task pre-committed, before its commit message reaches the driver",
    )
    DRIVER_BEFORE_DECISION = (
        "driver.before_decision",
        "every task pre-committed; the driver's commit(N) has not begun the decision",
    )
    DRIVER_BEFORE_VERIFY = (
        "driver.before_verify",
        "after recovery (R1) and the lingering sweep (R2), before verify (V) and decision (3)",
    )
    DRIVER_BEFORE_END_TXN = (
        "driver.before_end_txn",
        "a decision is durable, before its EndTxn(commit)s (step 4), also when recovery re-drives",
    )
    DRIVER_AFTER_COMMIT = (
        "driver.after_commit",
        "batch N committed and confirmed (step 5), before Spark records commits/N",
    )


class InjectedFault(KafkaEosError):
    """Raised by a ``raise`` fault point; only tests ever see it."""

    code = "KAFKA_EOS.TESTING.INJECTED_FAULT"


class UnknownCrashPoint(KafkaEosError, ValueError):
    """A fault point name that :class:`CrashPoint` does not register."""

    code = "KAFKA_EOS.TESTING.UNKNOWN_CRASH_POINT"

    def __init__(self, name: str, where: str) -> None:
        self.name = name
        known = ", ".join(CrashPoint)
        super().__init__(
            f"unknown crash point {name!r} {where}; known crash points: {known} "
            "(checkpoint.crashpoints.CrashPoint)"
        )


def _registered(name: str, where: str) -> CrashPoint:
    try:
        return CrashPoint(name)
    except ValueError:
        raise UnknownCrashPoint(name, where) from None


@dataclass(frozen=True)
class CrashSpec:
    """A parsed ``KAFKA_EOS_CRASH_AT``: where, at which checkpoint and hit, and what to do."""

    point: CrashPoint
    checkpoint_id: int | None = None
    hit: int | None = None
    action: str = "kill"


def parse_spec(raw: str) -> CrashSpec:
    """Parse ``<name>[@<checkpoint id>][#<hit>][:<action>]``; a malformed spec or an unknown
    name raises ``ValueError`` (:class:`UnknownCrashPoint` for the latter)."""
    spec = _SPEC.fullmatch(raw)
    if spec is None:
        # A typo must not turn a crash test into one that passes without crashing.
        raise ValueError(
            f"{ENV}={raw!r} is not <name>[@<checkpoint id>][#<hit>][:kill|kill-jvm|raise|"
            "stall=S|stall-until=/path]"
        )
    return CrashSpec(
        _registered(spec["name"], f"in {ENV}={raw!r}"),
        None if spec["id"] is None else int(spec["id"]),
        None if spec["hit"] is None else int(spec["hit"]),
        spec["action"] or "kill",
    )


def _count_hit(name: str) -> int:
    """This hit's number: per process, or across every process of the job when
    ``KAFKA_EOS_CRASH_HITS_DIR`` names a directory (Spark runs each task attempt in a Python
    worker that may be new, so "the first hit" must be counted job-wide)."""
    folder = os.environ.get(HITS_DIR_ENV)
    if not folder:
        _hits[name] += 1
        return _hits[name]
    os.makedirs(folder, exist_ok=True)
    number = 1
    while True:
        try:
            os.close(os.open(os.path.join(folder, f"{name}.{number}"), os.O_CREAT | os.O_EXCL))
            return number
        except FileExistsError:
            number += 1


@contextmanager
def checkpoint_scope(checkpoint_id: int) -> Iterator[None]:
    """Name the checkpoint for fault points reached by code that does not know it."""
    _scope.append(checkpoint_id)
    try:
        yield
    finally:
        _scope.pop()


def _kill_hosting_jvm(name: str) -> NoReturn:
    """SIGKILL the nearest ``java`` ancestor, found by walking up from this very process (so
    never some other JVM of the same name), then this process."""
    import psutil

    for ancestor in psutil.Process().parents():
        if ancestor.name() == "java":
            ancestor.kill()
            os.kill(os.getpid(), signal.SIGKILL)
    # No JVM above us: killing the job instead would pass for a test of an executor loss.
    raise RuntimeError(f"fault point {name}: kill-jvm found no JVM among this process's parents")


def _wait_for(path: str, limit_s: float = 600) -> None:
    deadline = time.monotonic() + limit_s
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise InjectedFault(f"stall-until={path}: the file did not appear in {limit_s} s")
        time.sleep(0.1)


def struck_marker(folder: str, point: CrashPoint) -> str:
    """The file that says ``point`` struck, in the ``KAFKA_EOS_CRASH_HITS_DIR`` folder: a
    test asserts it, so that a fault that never fired cannot pass for one that was survived."""
    return os.path.join(folder, f"struck-{point.value}")


def _record_strike(point: CrashPoint) -> None:
    folder = os.environ.get(HITS_DIR_ENV)
    if folder:
        os.makedirs(folder, exist_ok=True)
        with open(struck_marker(folder, point), "a"):
            pass  # written before the action: a kill -9 keeps what the kernel has


def crash_point(name: CrashPoint | str, *, checkpoint_id: int | None = None) -> None:
    """Strike here if ``KAFKA_EOS_CRASH_AT`` names this point (and checkpoint, and hit).

    ``name`` must be registered in :class:`CrashPoint`, armed or not, so that any test that
    runs this code catches a renamed point.
    """
    point = _registered(name, "passed to crash_point(): register it in CrashPoint")
    raw = os.environ.get(ENV, "")
    if not raw:
        return
    spec = parse_spec(raw)
    if spec.point is not point:
        return
    current = checkpoint_id if checkpoint_id is not None else (_scope[-1] if _scope else None)
    if spec.checkpoint_id is not None and current != spec.checkpoint_id:
        return
    if spec.hit is not None and _count_hit(point.value) != spec.hit:
        return
    _record_strike(point)
    action = spec.action
    if action == "raise":
        raise InjectedFault(f"fault injected at {point} (checkpoint {current})")
    if action.startswith("stall="):
        time.sleep(float(action.removeprefix("stall=")))
        return
    if action.startswith("stall-until="):
        _wait_for(action.removeprefix("stall-until="))
        return
    if action == "kill-jvm":
        _kill_hosting_jvm(point)
    os.killpg(int(os.environ.get(PGID_ENV, os.getpgrp())), signal.SIGKILL)
    # Spark may run this process in a group of its own: it must not outlive its job.
    os.kill(os.getpid(), signal.SIGKILL)
