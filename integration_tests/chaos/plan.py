"""The chaos run's schedule: which faults, in which order, aimed where, all drawn from one seed.

Pure: the same seed and counts give the same plan, so a failed run is replayed from the seed it
printed. What a fault's timing depends on (a batch in flight, a decision appearing) is watched
for at run time; the plan only says what to wait for and what to break.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import StrEnum

from checkpoint.crashpoints import CrashPoint


class FaultKind(StrEnum):
    DRIVER = "driver kill -9"
    EXECUTOR = "executor kill -9"
    BROKER_KILL = "broker kill -9 and restart"
    BROKER_PAUSE = "broker SIGSTOP past its session timeout, then SIGCONT"


class Target(StrEnum):
    """Where a fault lands. Driver kills name the protocol phase they are aimed at."""

    PRODUCING = "tasks producing into open transactions"
    PRE_COMMITTED = "a task pre-committed, its commit message not yet at the driver"
    BEFORE_DECISION = "every task pre-committed, no decision yet"
    DECIDED = "the decision durable, no EndTxn sent"
    MID_END_TXN = "the decision durable, some EndTxns delivered"
    ENDED = "every EndTxn done, Spark's commits/N not yet written"
    EXECUTOR_JVM = "an executor JVM, with its Python workers"
    PYTHON_WORKER = "a Python worker of an executor"
    OUTPUT_LEADER = "the leader of an output partition, tasks producing"
    COORDINATOR = "a transaction coordinator, as its batch's markers are written"
    ANY_BROKER = "a random broker, batches running"


TARGETS: dict[FaultKind, tuple[Target, ...]] = {
    FaultKind.DRIVER: (
        Target.PRODUCING,
        Target.PRE_COMMITTED,
        Target.BEFORE_DECISION,
        Target.DECIDED,
        Target.MID_END_TXN,
        Target.ENDED,
    ),
    FaultKind.EXECUTOR: (Target.EXECUTOR_JVM, Target.PYTHON_WORKER),
    FaultKind.BROKER_KILL: (Target.OUTPUT_LEADER, Target.COORDINATOR),
    FaultKind.BROKER_PAUSE: (Target.ANY_BROKER,),
}

# The crash point a driver kill waits at (a stall-until handshake), then kills from outside.
DRIVER_POINTS: dict[Target, CrashPoint] = {
    Target.PRODUCING: CrashPoint.TASK_BEFORE_PRE_COMMIT,
    Target.PRE_COMMITTED: CrashPoint.TASK_AFTER_PRE_COMMIT,
    Target.BEFORE_DECISION: CrashPoint.DRIVER_BEFORE_DECISION,
    Target.DECIDED: CrashPoint.DRIVER_BEFORE_END_TXN,
    Target.MID_END_TXN: CrashPoint.DRIVER_BEFORE_END_TXN,
    Target.ENDED: CrashPoint.DRIVER_AFTER_COMMIT,
}


@dataclass(frozen=True)
class Fault:
    kind: FaultKind
    target: Target
    hit: int  # a driver kill strikes at this hit of its point; others: batches to let pass
    hold_s: float  # how long a killed broker stays down, or a paused one stopped

    def describe(self) -> str:
        return (
            f"{self.kind} at {self.target.name.lower()} (hit {self.hit}, hold {self.hold_s:.1f} s)"
        )


def plan(seed: int, per_kind: dict[FaultKind, int], *, session_timeout_s: float) -> list[Fault]:
    """``per_kind[k]`` faults of each kind in a seeded order, the targets of a kind in turn from
    a seeded start so that every target is hit once the count allows, and not a driver kill
    last. Before each, 0 or 1 batches pass (hit 1 or 2): more would only lengthen the run.
    Pauses outlast the brokers' session timeout by up to 2 s."""
    rng = random.Random(seed)
    faults = []
    for kind, count in per_kind.items():
        targets = TARGETS[kind]
        first = rng.randrange(len(targets))
        for i in range(count):
            target = targets[(first + i) % len(targets)]
            if kind is FaultKind.BROKER_PAUSE:
                hold = session_timeout_s + rng.uniform(0.5, 2.0)
            else:  # a killed broker is down this long, then for its JVM's start (6 s or so)
                hold = rng.uniform(0.5, 2.0)
            faults.append(Fault(kind, target, rng.randint(1, 2), round(hold, 1)))
    rng.shuffle(faults)
    # A run ends with its query catching up: a driver kill last would add a restart for nothing.
    last = max((i for i, f in enumerate(faults) if f.kind is not FaultKind.DRIVER), default=None)
    if last is not None:
        faults.append(faults.pop(last))
    return faults
