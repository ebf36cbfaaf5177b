"""Fault injection and bookkeeping for the property tests (imported by them, not collected).

Every I/O step of the protocol (a file write or delete in the store, a commit, abort or
recover of the committer) goes through :meth:`Faults.step`, where an armed countdown can kill
the process (:class:`SimulatedCrash`) or make the step fail transiently, before or after its
effect. :class:`Ledger` records what became durable and what became visible, at the instant
it happened, so the invariants compare the two.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from checkpoint.model import Committable, Snapshot
from checkpoint.store import SnapshotStore
from checkpoint.testing import InMemoryBroker, InMemoryParticipant, Transaction, TransactionState

T = TypeVar("T")
Key = tuple[str, int, int]


class SimulatedCrash(BaseException):
    """The process dies: a BaseException, so no ``except Exception`` in the code runs."""

    def __init__(self, where: str) -> None:
        super().__init__(f"crash before {where}")
        verb, _, target = where.partition(" ")  # e.g. "write 3.snapshot.json", "commit app-0-3"
        if target.startswith("."):
            kind = "temporary"
        else:
            kind = target.split(".")[1] if target.count(".") == 2 else target.split("/")[0]
        self.where = f"{verb} {kind}" if verb in ("write", "delete") else verb  # for statistics


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
        self.doomed_keys: set[Key] = set()  # of aborted checkpoints: must never be visible
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
        self.decided[snapshot.checkpoint_id] = snapshot
        self.decided_keys |= {c.key for c in snapshot.committables}

    def on_visible(self, txn: Transaction) -> None:
        if txn.key not in self.decided_keys:
            self.violations.append(f"{txn.key} (checkpoint {txn.checkpoint_id}) became visible "
                                   "before a durable decision named it")  # fmt: skip


def faulty_store(location: str, retain: int, faults: Faults, ledger: Ledger) -> SnapshotStore:
    """A real store whose backend passes every write and delete through ``faults``."""
    store = SnapshotStore(location, retain=retain)
    store._fs = _FaultyFileSystem(store._fs, faults, ledger)  # type: ignore[assignment]
    return store


class _FaultyFileSystem:
    def __init__(self, inner: Any, faults: Faults, ledger: Ledger) -> None:
        self.inner, self.faults, self.ledger = inner, faults, ledger
        self.read, self.exists, self.list = inner.read, inner.exists, inner.list

    def write_atomic(self, path: str, data: bytes) -> None:
        directory, _, name = path.rpartition("/")

        def effect() -> None:
            self.inner.write_atomic(path, data)
            self.ledger.on_written(name, data)

        def torn() -> None:  # the temporary got half the bytes; the rename never happened
            temp = f"{directory}/.{name}.tmp-{uuid.uuid4().hex}"
            self.inner.write_atomic(temp, data[: len(data) // 2])

        self.faults.step(f"write {name}", effect, torn)

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

    def recover(self, decided: Sequence[Committable]) -> None:
        self.faults.step("recover", lambda: self.inner.recover(decided))


def newest_key(broker: InMemoryBroker, transactional_id: str) -> Key:
    return [t for t in broker.transactions(transactional_id)
            if t.transactional_id == transactional_id][-1].key  # fmt: skip


def committed_keys(broker: InMemoryBroker) -> set[Key]:
    return {t.key for t in broker.transactions() if t.state is TransactionState.COMMITTED}


def duplicates(broker: InMemoryBroker) -> list[Any]:
    return [record for record, count in Counter(broker.visible).items() if count > 1]


def remove_memory_root(location: str) -> None:
    import fsspec

    fs = fsspec.filesystem("memory")
    path = location.removeprefix("memory:/")
    if fs.exists(path):
        fs.rm(path, recursive=True)
