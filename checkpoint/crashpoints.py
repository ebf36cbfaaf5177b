"""Named fault points, for the tests that break the pipeline at the worst moment.

Protocol code marks the moments where a failure is most dangerous with ``crash_point(name)``.
It does nothing unless ``KAFKA_EOS_CRASH_AT`` is set to
``<name>[@<checkpoint id>][#<hit>][:<action>]``, where the action is

- ``kill`` (the default): SIGKILL the process group named by ``KAFKA_EOS_CRASH_PGID`` (the
  job's, so a crash in a Spark worker takes the driver and its JVM down too; Spark starts
  workers in groups of their own), else this process's group: a ``kill -9`` of the job.
  Nothing is flushed or closed, so the test sees exactly what a real crash leaves behind;
- ``raise``: raise :class:`InjectedFault` here, as a failing task or call would;
- ``stall=<seconds>``: sleep, as a slow batch, a GC pause or a hung call would;
- ``stall-until=<path>``: sleep until the file ``path`` exists (at most 10 minutes): a
  handshake, so that a test acts while the process is held at this point, however slow the
  machine;
- ``kill-after=<seconds>``: sleep, then kill: a process that dies a little later, after the
  client's background threads sent what was in flight;
- ``kill-jvm``: SIGKILL the nearest JVM among this process's ancestors, then this process.
  In a Spark Python worker that JVM is its executor: an executor lost with everything in it,
  while the driver lives on (with ``local-cluster``, where executors are JVMs of their own).

>>> crash_point("driver.before_decision", checkpoint_id=3)  # unset: a no-op
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

from checkpoint.errors import KafkaEosError

ENV = "KAFKA_EOS_CRASH_AT"
PGID_ENV = "KAFKA_EOS_CRASH_PGID"
HITS_DIR_ENV = "KAFKA_EOS_CRASH_HITS_DIR"
_SPEC = re.compile(
    r"(?P<name>[\w.]+)(?:@(?P<id>\d+))?(?:#(?P<hit>\d+))?"
    r"(?::(?P<action>kill|kill-jvm|raise|stall=[\d.]+|kill-after=[\d.]+|stall-until=/\S+))?"
)
_hits: Counter[str] = Counter()
_scope: list[int] = []


class InjectedFault(KafkaEosError):
    """Raised by a ``raise`` fault point; only tests ever see it."""


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


def crash_point(name: str, *, checkpoint_id: int | None = None) -> None:
    raw = os.environ.get(ENV, "")
    if not raw:
        return
    spec = _SPEC.fullmatch(raw)
    if spec is None:
        # A typo must not turn a crash test into one that passes without crashing.
        raise ValueError(
            f"{ENV}={raw!r} is not <name>[@<checkpoint id>][#<hit>][:kill|kill-jvm|raise|"
            "stall=S|stall-until=/path|kill-after=S]"
        )
    if spec["name"] != name:
        return
    current = checkpoint_id if checkpoint_id is not None else (_scope[-1] if _scope else None)
    if spec["id"] is not None and current != int(spec["id"]):
        return
    if spec["hit"] is not None and _count_hit(name) != int(spec["hit"]):
        return
    action = spec["action"] or "kill"
    if action == "raise":
        raise InjectedFault(f"fault injected at {name} (checkpoint {current})")
    if action.startswith("stall="):
        time.sleep(float(action.removeprefix("stall=")))
        return
    if action.startswith("stall-until="):
        _wait_for(action.removeprefix("stall-until="))
        return
    if action == "kill-jvm":
        _kill_hosting_jvm(name)
    if action.startswith("kill-after="):
        time.sleep(float(action.removeprefix("kill-after=")))
    os.killpg(int(os.environ.get(PGID_ENV, os.getpgrp())), signal.SIGKILL)
    # Spark may run this process in a group of its own: it must not outlive its job.
    os.kill(os.getpid(), signal.SIGKILL)
