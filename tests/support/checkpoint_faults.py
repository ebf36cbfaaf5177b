"""Fault injection and bookkeeping for the property tests (imported by them, not collected).

Every I/O step of the protocol (a file read, exists, list, write or delete in the store, a
commit, abort or recover of the committer) goes through :meth:`Faults.step`, where an armed
countdown can kill the process (:class:`SimulatedCrash`) or make the step fail transiently,
before or after its effect. :class:`Ledger` records what became durable and what became
visible, at the instant it happened, so the invariants compare the two.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar
from unittest import mock

from hypothesis import HealthCheck, Phase, seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, run_state_machine_as_test

from checkpoint.errors import CheckpointCommitFailed
from checkpoint.model import CheckpointId, Committable, Snapshot
from checkpoint.participant import commit_each
from checkpoint.store import SnapshotStore
from checkpoint.testing import InMemoryBroker, InMemoryParticipant, Transaction, TransactionState

T = TypeVar("T")
Key = tuple[str, int, int]
Fault = tuple[str, int, bool]


def fault_strategy(max_steps: int) -> st.SearchStrategy[Fault]:
    """A fault to arm: crash or fail at one of the next ``max_steps + 1`` I/O steps."""
    return st.tuples(st.sampled_from(["crash", "fail"]), st.integers(0, max_steps), st.booleans())


class InvariantViolated(AssertionError):
    """An invariant of a property machine failed. ``invariant`` names it, so that a seeded
    bug's test checks that the bug broke the invariant it is meant to break, not that some
    assertion failed somewhere."""

    def __init__(self, invariant: str, detail: object = "") -> None:
        super().__init__(f"{invariant}: {detail}")
        self.invariant = invariant


def named(check: Callable[..., None]) -> Callable[..., None]:
    """Under ``@invariant()`` (or on a check a rule calls): a failed assertion in ``check``
    becomes :class:`InvariantViolated`, named after ``check``."""
    return named_as(check.__name__)(check)


def named_as(invariant: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """:func:`named`, with the invariant's name given: for a check shared by machines."""

    def decorate(check: Callable[..., None]) -> Callable[..., None]:
        @functools.wraps(check)
        def wrapper(*args: Any, **kwargs: Any) -> None:
            try:
                check(*args, **kwargs)
            except InvariantViolated:
                raise
            except AssertionError as failed:
                raise InvariantViolated(invariant, failed) from failed

        return wrapper

    return decorate


@dataclass(frozen=True)
class SeededBug:
    """A bug planted in the code under test (``patches``) and the invariant it must break."""

    invariant: str
    patches: tuple[Any, ...]


def misfits(bug: SeededBug) -> list[str]:
    """The patches of ``bug`` that cannot take the call the patched function takes: such a
    bug fails with a TypeError of its own, which an invariant may take for the bug."""
    wrong = []
    for patch in bug.patches:
        shipped = inspect.signature(getattr(patch.getter(), patch.attribute)).parameters
        positional = [p.name for p in shipped.values() if p.kind <= p.POSITIONAL_OR_KEYWORD]
        keywords = {p.name: None for p in shipped.values() if p.kind == p.KEYWORD_ONLY}
        try:
            inspect.signature(patch.new).bind(*positional, **keywords)
        except TypeError as error:
            wrong.append(f"{patch.attribute}: {error}")
    return wrong


def assert_seeded_bug_found(
    bug: str,
    bugs: Mapping[str, SeededBug],
    seeds: Mapping[str, int],
    hunt_bug: Callable[[str, int], tuple[str | None, int]],
) -> None:
    """A seeded bug's test, for every machine: its patches take their calls, and from its
    fixed seed it breaks the invariant it is meant to break, by name, within the budget."""
    assert not misfits(bugs[bug]), "a patch that its call would break"
    broken, schedules = hunt_bug(bug, seeds[bug])
    assert broken == bugs[bug].invariant, (
        f"{bug!r} from seed {seeds[bug]}: {broken or 'nothing'} failed after {schedules} schedules"
    )


@contextlib.contextmanager
def no_local_constants() -> Iterator[None]:
    """Hypothesis (pinned in pyproject.toml) sometimes draws numbers and strings found in the
    project's imported modules ("local constants"): a fixed seed then gave other schedules
    whenever another module was imported, or tests were collected together. Without them a
    seed's schedules depend on the seed, the machine and the pinned Hypothesis only."""
    from hypothesis.internal.conjecture import providers
    from hypothesis.internal.constants_ast import Constants

    providers.CONSTANTS_CACHE.cache.clear()
    with mock.patch.object(providers, "_get_local_constants", Constants):
        yield
    providers.CONSTANTS_CACHE.cache.clear()


def hunt(
    machine: type[RuleBasedStateMachine],
    bug: SeededBug,
    at_seed: int,
    *,
    budget: int,
    steps: int,
) -> tuple[str | None, int]:
    """Search ``budget`` random schedules of ``machine`` from ``at_seed`` with ``bug``
    planted: the invariant that failed (None: none did; an error's type if no invariant named
    it) and the schedules it took."""
    schedules = 0

    def fresh() -> RuleBasedStateMachine:
        nonlocal schedules
        schedules += 1
        return machine()

    with contextlib.ExitStack() as stack:
        stack.enter_context(no_local_constants())
        for patch in bug.patches:
            stack.enter_context(patch)
        try:
            run_state_machine_as_test(
                seed(at_seed)(fresh),
                settings=settings(
                    max_examples=budget,
                    stateful_step_count=steps,
                    database=None,
                    deadline=None,
                    suppress_health_check=list(HealthCheck),
                    report_multiple_bugs=False,
                    phases=[Phase.generate],
                ),
            )
        except InvariantViolated as violation:
            return violation.invariant, schedules
        except Exception as other:  # no invariant named it: a crash of the model, say
            return f"{type(other).__name__} (no invariant)", schedules
    return None, schedules


class SimulatedCrash(BaseException):
    """The process dies: a BaseException, so no ``except Exception`` in the code runs."""

    def __init__(self, where: str) -> None:
        super().__init__(f"crash before {where}")
        verb, _, target = where.partition(" ")  # e.g. "write 3.snapshot.json", "commit app-0-3"
        if target.startswith("."):
            kind = "temporary"
        else:
            kind = target.split(".")[1] if target.count(".") == 2 else target.split("/")[0]
        files = ("write", "delete", "read", "exists")
        self.where = f"{verb} {kind}" if verb in files else verb  # for statistics


class InjectedFailure(Exception):
    """A transient error (timeout, lost response); retrying or recovering must fix it."""


class Faults:
    """Countdowns over the I/O steps: ``crash_in=n`` kills at the n-th next step, ``fail_in=n``
    fails it; ``fail_after`` fails after the effect (a lost response), ``tear`` leaves a torn
    temporary file when a crash hits a write."""

    def __init__(self) -> None:
        self.crash_in: int | None = None
        self.fail_in: int | None = None
        self.fail_after = False
        self.tear = False

    def arm(self, fault: Fault) -> None:
        """``("crash", n, tear)`` or ``("fail", n, after)``, as drawn by :func:`fault_strategy`."""
        kind, steps, flag = fault
        if kind == "crash":
            self.crash_in, self.tear = steps, flag
        else:
            self.fail_in, self.fail_after = steps, flag

    def step(
        self, where: str, effect: Callable[[], T], torn: Callable[[], None] | None = None
    ) -> T:
        crash, fail = self._due("crash_in"), self._due("fail_in")
        if crash:
            if torn is not None and self.tear:
                torn()
            raise SimulatedCrash(where)
        if fail and not self.fail_after:
            raise InjectedFailure(f"failure before {where}")
        result = effect()
        if fail:
            raise InjectedFailure(f"failure after {where}")
        return result

    def _due(self, name: str) -> bool:
        count = getattr(self, name)
        if count is None:
            return False
        setattr(self, name, None if count == 0 else count - 1)
        return count == 0


class Ledger:
    """The ground truth the invariants check: durable decisions and visible transactions."""

    def __init__(self) -> None:
        self.decided: dict[int, Snapshot] = {}
        self.decided_keys: set[Key] = set()
        self.visible_keys: set[Key] = set()
        self.doomed_keys: set[Key] = set()  # of aborted checkpoints: must never be visible
        self.doomed_ids: set[int] = set()  # in flight when an older one aborted: never decided
        self.confirmed: set[int] = set()
        self.violations: list[str] = []

    def on_written(self, name: str, data: bytes) -> None:
        if name.endswith(".confirmed.json"):
            self.confirmed.add(int(name.split(".")[0]))
        if not name.endswith(".snapshot.json"):
            return
        record = json.loads(data)
        record.pop("sha256")
        snapshot = Snapshot.from_dict(record)
        if self.decided and snapshot.checkpoint_id <= max(self.decided):
            self.violations.append(f"decision {snapshot.checkpoint_id} after {max(self.decided)}")
        if snapshot.checkpoint_id in self.doomed_ids:
            self.violations.append(
                f"decision {snapshot.checkpoint_id} skips the input of an older checkpoint that "
                "was aborted while it was in flight"
            )
        self.decided[snapshot.checkpoint_id] = snapshot
        self.decided_keys |= {c.key for c in snapshot.committables}

    def on_visible(self, txn: Transaction) -> None:
        if txn.key not in self.decided_keys:
            self.violations.append(f"{txn.key} (checkpoint {txn.checkpoint_id}) became visible "
                                   "before a durable decision named it")  # fmt: skip
        behind = [
            cid
            for cid, snapshot in self.decided.items()
            if cid < txn.checkpoint_id
            and not {c.key for c in snapshot.committables} <= self.visible_keys
        ]
        if behind:
            self.violations.append(
                f"{txn.key} (checkpoint {txn.checkpoint_id}) became visible before all of older "
                f"decided checkpoint(s) {behind}"
            )
        self.visible_keys.add(txn.key)

    def rolled_back(self, broker: InMemoryBroker) -> list[Key]:
        """Decided transactions that were aborted: a decided batch lost."""
        aborted = (t for t in broker.transactions() if t.state is TransactionState.ABORTED)
        return [t.key for t in aborted if t.key in self.decided_keys]


@named_as("a_commit_fails_only_from_an_injected_failure")
def check_commit_failed(error: CheckpointCommitFailed) -> None:
    """A commit may fail only from an injected failure; any other cause is a bug, such as
    committing a decided transaction that something aborted. Every commit's error is checked:
    a transient one may come first and hide the one that means data loss."""
    assert error.errors, f"{error!r} carries no commit error"
    unexpected = [e for e in error.errors if not isinstance(e, InjectedFailure)]
    assert not unexpected, f"commits failed from other causes than the injected: {unexpected!r}"


class MemoryFiles:
    """The files of one run in a dict, behind the store's backend interface.

    The property tests check the protocol above the backend, which has its own unit tests
    (local, ``memory://``, pyarrow). Skipping pyarrow and fsspec here makes a schedule about 15%
    cheaper, so CI runs more of them. A write is atomic: one dict assignment.
    """

    root = "/kafka-eos"

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}

    def read(self, path: str) -> bytes:
        try:
            return self.files[path]
        except KeyError:
            raise FileNotFoundError(path) from None

    def write_atomic(self, path: str, data: bytes) -> None:
        self.files[path] = data

    def create(self, path: str, data: bytes) -> None:
        if path in self.files:
            raise FileExistsError(path)
        self.files[path] = data

    def exists(self, path: str) -> bool:
        return path in self.files

    def list(self, directory: str) -> list[str]:
        return [p.rpartition("/")[2] for p in self.files if p.rpartition("/")[0] == directory]

    def delete(self, path: str) -> None:
        self.files.pop(path, None)


def open_store(
    files: MemoryFiles, retain: int = 10, faults: Faults | None = None, ledger: Ledger | None = None
) -> SnapshotStore:
    """A real store on ``files``, a fresh handle as in a new process; with ``faults`` and
    ``ledger``, every file operation goes through the faults and every write to the ledger."""
    store = SnapshotStore(files.root, retain=retain)  # no I/O until the backend is swapped
    backend = (
        files if faults is None or ledger is None else _FaultyFileSystem(files, faults, ledger)
    )
    store._fs = backend  # type: ignore[assignment]
    return store


class _FaultyFileSystem:
    def __init__(self, inner: MemoryFiles, faults: Faults, ledger: Ledger) -> None:
        self.inner, self.faults, self.ledger = inner, faults, ledger

    def read(self, path: str) -> bytes:
        return self.faults.step(f"read {path.rpartition('/')[2]}", lambda: self.inner.read(path))

    def exists(self, path: str) -> bool:
        name = path.rpartition("/")[2]
        return self.faults.step(f"exists {name}", lambda: self.inner.exists(path))

    def list(self, directory: str) -> list[str]:
        return self.faults.step("list", lambda: self.inner.list(directory))

    def write_atomic(self, path: str, data: bytes) -> None:
        directory, _, name = path.rpartition("/")

        def effect() -> None:
            self.inner.write_atomic(path, data)
            self.ledger.on_written(name, data)

        def torn() -> None:  # the temporary got half the bytes; the rename never happened
            temp = f"{directory}/.{name}.tmp-{uuid.uuid4().hex}"
            self.inner.write_atomic(temp, data[: len(data) // 2])

        self.faults.step(f"write {name}", effect, torn)

    create = write_atomic  # one writer: the store checked that the name is free

    def delete(self, path: str) -> None:
        self.faults.step(f"delete {path.rpartition('/')[2]}", lambda: self.inner.delete(path))


class FaultyCommitter:
    """The driver-side committer, with every call passed through ``faults``."""

    def __init__(self, inner: InMemoryParticipant, faults: Faults) -> None:
        self.inner, self.faults = inner, faults

    def commit(self, committable: Committable) -> None:
        where = f"commit {committable.transactional_id}"
        self.faults.step(where, lambda: self.inner.commit(committable))

    def abort(self, committable: Committable) -> None:
        self.faults.step(
            f"abort {committable.transactional_id}", lambda: self.inner.abort(committable)
        )

    def commit_all(self, committables: Sequence[Committable]) -> list[tuple[str, Exception]]:
        return commit_each(self.commit, committables)

    def verify(self, checkpoint_id: CheckpointId, committables: Sequence[Committable]) -> None:
        self.faults.step("verify", lambda: self.inner.verify(checkpoint_id, committables))

    def abort_lingering(self, keep: Sequence[Committable]) -> None:
        self.faults.step("abort lingering", lambda: self.inner.abort_lingering(keep))


def newest_key(broker: InMemoryBroker, transactional_id: str) -> Key:
    return [t for t in broker.transactions(transactional_id)
            if t.transactional_id == transactional_id][-1].key  # fmt: skip


def committed_keys(broker: InMemoryBroker) -> set[Key]:
    return {t.key for t in broker.transactions() if t.state is TransactionState.COMMITTED}


def duplicates(broker: InMemoryBroker) -> list[Any]:
    return [record for record, count in Counter(broker.visible).items() if count > 1]


class LedgerMachine(RuleBasedStateMachine):
    """The base of the property machines: an in-memory broker and store files, faults to arm,
    a ledger that sees each decision written and each transaction made visible, and the checks
    every machine makes of them. A machine adds its process (coordinator or driver) and rules."""

    def __init__(self) -> None:
        super().__init__()
        self.files = MemoryFiles()
        self.broker = InMemoryBroker()
        self.faults = Faults()
        self.ledger = Ledger()
        self.broker.listeners.append(self.ledger.on_visible)
        self.reader = open_store(self.files)  # another handle on the same files, never faulty

    @named
    def recovery_commits_every_decision_and_leaves_nothing_open(self) -> None:
        assert committed_keys(self.broker) >= self.ledger.decided_keys, "a decision was lost"
        assert self.broker.lingering() == [], "recovery left a transaction open"

    @invariant()
    @named
    def nothing_visible_before_its_decision_is_durable(self) -> None:
        assert not self.ledger.violations, self.ledger.violations

    @invariant()
    @named
    def decided_transactions_are_never_rolled_back(self) -> None:
        assert not self.ledger.rolled_back(self.broker), "a decided transaction was aborted"
