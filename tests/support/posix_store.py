"""The decision store of a property test on a POSIX disk that can lose power.

The store is the shipped one all the way down: ``SnapshotStore`` over the real
``checkpoint._filesystem._LocalFileSystem`` (temporary file, fsync, ``os.replace``, fsync of
the directory), whose ``os`` and ``open`` run on a :class:`~posix_model.PosixModel`. Each
store operation is one step of :class:`~checkpoint_faults.Faults`, as with ``MemoryFiles``;
a crash that tears a write strikes before one of the write's changes to the disk, or just
after it (``torn`` in :class:`_FaultyLocalFileSystem`).

The :class:`~checkpoint_faults.Ledger` hears of a decision or confirmation when it becomes
*durable* (it would survive a power loss, checksum intact), not when it is written: a
decision that only the page cache holds is no decision, and committing what it names breaks
"nothing is committed that no durable decision names".
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from typing import Any

from checkpoint_faults import Faults, Ledger, SimulatedCrash
from posix_model import PosixModel, ProcessCrashed

from checkpoint import _filesystem
from checkpoint.store import _NAME, SnapshotStore, _checksum


class PosixDisk:
    """The driver's local disk: a :class:`PosixModel` holding the store at ``location``,
    whose parent (the engine's checkpoint directory) exists and is durable."""

    def __init__(self, location: str, ledger: Ledger) -> None:
        self.location = location.rstrip("/")
        self.ledger = ledger
        self.model = PosixModel()
        self.model.makedirs(self.location.rpartition("/")[0])
        self.model.sync_all()
        self._reported: dict[str, bytes] = {}
        self.model.on_sync.append(self._report_durable)

    @contextlib.contextmanager
    def mounted(self) -> Iterator[None]:
        """``checkpoint._filesystem`` runs on this disk while the context is open."""
        with self.model.patch(_filesystem):
            yield

    def open_store(
        self,
        retain: int,
        faults: Faults,
        on_write: Callable[[str, bytes], None] = lambda name, data: None,
    ) -> SnapshotStore:
        """A fresh handle, as in a new process, with every operation passed through
        ``faults``; ``on_write(name, data)`` is called at the instant a write starts."""
        store = SnapshotStore(self.location, retain=retain)
        store._fs = _FaultyLocalFileSystem(store._fs, self.model, faults, on_write)  # type: ignore[assignment,arg-type]
        return store

    def _report_durable(self) -> None:
        for name, data in self.model.durable_files(self.location).items():
            if _NAME.match(name) and self._reported.get(name) != data and _intact(data):
                self._reported[name] = data
                self.ledger.on_written(name, data)


def _intact(data: bytes) -> bool:
    """Whether the store would read ``data`` (a file that lost its bytes would not)."""
    try:
        record = json.loads(data)
    except ValueError:
        return False
    return isinstance(record, dict) and record.pop("sha256", None) == _checksum(record)


class _FaultyLocalFileSystem:
    """The real local backend; each call is one fault step. A process the model killed gets
    :class:`SimulatedCrash`, as the machines expect."""

    def __init__(
        self,
        inner: _filesystem._LocalFileSystem,
        model: PosixModel,
        faults: Faults,
        on_write: Callable[[str, bytes], None],
    ) -> None:
        self.inner, self.model, self.faults, self.on_write = inner, model, faults, on_write

    def _step(self, where: str, effect: Callable[[], Any], torn: Any = None) -> Any:
        def run() -> Any:
            try:
                return effect()
            except ProcessCrashed as dead:
                raise SimulatedCrash(where) from dead

        try:
            return self.faults.step(where, run, torn)
        except SimulatedCrash:
            self.model.crash()  # nothing the dying process still runs reaches the disk
            raise

    def read(self, path: str) -> bytes:
        return self._step(f"read {_name(path)}", lambda: self.inner.read(path))

    def exists(self, path: str) -> bool:
        return self._step(f"exists {_name(path)}", lambda: self.inner.exists(path))

    def list(self, directory: str) -> list[str]:
        return self._step("list", lambda: self.inner.list(directory))

    def delete(self, path: str) -> None:
        self._step(f"delete {_name(path)}", lambda: self.inner.delete(path))

    def write_atomic(self, path: str, data: bytes) -> None:
        name = _name(path)

        def effect() -> None:
            self.on_write(name, data)
            self.inner.write_atomic(path, data)

        def torn() -> None:
            """The crash strikes inside the write, before its ``faults.tear``-th change to the
            disk (1: the temporary's creation, then its bytes, their fsync, the rename, the
            directory's fsync); past the last one, just after the write returned. The first
            write of a handle creates the location first: crashes in there are unit-tested
            (test_checkpoint_store.py), not counted here."""
            self.on_write(name, data)
            with contextlib.suppress(ProcessCrashed):
                self.inner._ensure_root()
                self.model.crash_after(int(self.faults.tear) - 1)
                self.inner.write_atomic(path, data)

        self._step(f"write {name}", effect, torn)

    create = write_atomic  # as _LocalFileSystem: one writer, which checked first


def _name(path: str) -> str:
    return path.rpartition("/")[2]
