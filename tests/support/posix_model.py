"""A crash-consistency model of a POSIX filesystem, for running real file code in tests.

What survives a crash depends on what crashed (fsync(2), rename(2); Pillai et al., "All File
Systems Are Not Created Equal", OSDI '14):

* a **process crash** (``kill -9``) keeps everything the process handed to the kernel: the
  page cache outlives the process. Only bytes still in the process's own buffers (written to
  a Python file object, never flushed) are lost;
* a **power loss** keeps only what was made durable. A file's bytes become durable when the
  file is fsynced; a directory's entries (create, rename, replace, unlink, mkdir) become
  durable when *that directory* is fsynced: fsync of a file does not make its name durable.
  So after a power loss an un-fsynced rename is undone, a file whose name is durable but whose
  data never was comes back empty, and a directory whose own entry was never fsynced in its
  parent is gone with everything in it.

Between fsyncs a real disk may also persist some of the pending directory operations;
``power_loss(keep=n)`` keeps the ``n`` oldest ones (ordered metadata, as a journaling
filesystem writes them), ``keep=0`` none. Not modelled: partial or reordered file data (a file
reverts to its last fsynced bytes, whole), hard links, permissions, free space.

:class:`PosixModel` holds the state; :meth:`PosixModel.patch` swaps a module's ``os`` and
``open`` for shims over it, so code such as ``checkpoint._filesystem`` runs unchanged on the
model. Only what the model implements is there: any other ``os`` call fails loudly
(AttributeError) instead of touching the real disk.
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import ModuleType, SimpleNamespace
from typing import Any
from unittest import mock


@dataclass
class _Inode:
    is_dir: bool
    data: bytes = b""  # a file's bytes in the page cache: what every process reads
    synced: bytes = b""  # ... and what a power loss leaves
    entries: dict[str, int] = field(default_factory=dict)  # a directory's names, as seen
    durable: dict[str, int] = field(default_factory=dict)  # ... and after a power loss

    def listing(self, durable: bool) -> dict[str, int]:
        """A directory's names as processes see them, or as a power loss leaves them."""
        return self.durable if durable else self.entries


# One directory operation not yet durable: (directory inode, name, inode or None if removed)
# for each entry it changes; a rename within one directory changes two entries at once.
_Change = tuple[int, str, int | None]

_ROOT = 0


class ProcessCrashed(BaseException):
    """Raised by the model at the system call where :meth:`PosixModel.crash_after` kills the
    process, and by every call the dead process makes after it (a dead process runs no
    cleanup). A BaseException, so no ``except Exception`` in the code under test runs."""


class PosixModel:
    """Files and directories, each with the state processes see and the state a power loss
    leaves. Paths are absolute; ``/`` always exists and is durable."""

    def __init__(self) -> None:
        self._inodes: dict[int, _Inode] = {_ROOT: _Inode(is_dir=True)}
        self._pending: list[tuple[_Change, ...]] = []  # directory operations, oldest first
        self._fds: dict[int, int] = {}  # descriptor -> inode
        self._next_fd = 3
        self._next_ino = _ROOT + 1
        self._crash_in: int | None = None
        self.dead = False  # the process crashed: its calls fail until revive()
        self.trace: list[tuple[str, str]] = []  # (call, path) of every call that changes state
        self.on_sync: list[Callable[[], None]] = []  # called after anything became durable

    # -- what tests do to the machine ------------------------------------------------------

    def crash_after(self, changes: int) -> None:
        """Kill the process at its ``changes``-th next call that changes the disk (0: the next
        one), before it takes effect. Calls that only look (stat, listdir, read) are no crash
        points of their own: a crash before one is a crash before the next change."""
        self._crash_in = changes

    def crash(self) -> None:
        """A process crash: the page cache survives; open descriptors and unflushed Python
        buffers die with the process."""
        self._fds.clear()
        self._crash_in = None
        self.dead = True

    def revive(self) -> None:
        """A new process starts on the same disk."""
        self._crash_in = None
        self.dead = False

    def power_loss(self, keep: int = 0) -> None:
        """The machine loses power: the disk keeps what was durable, plus the ``keep`` oldest
        directory operations still pending; everything else is lost."""
        for change in self._pending[:keep]:
            self._apply(change, durable=True)
        self._pending.clear()
        live = self._reachable(durable=True)
        self._inodes = {ino: node for ino, node in self._inodes.items() if ino in live}
        for node in self._inodes.values():
            node.data = node.synced
            node.entries = dict(node.durable)
        self.crash()
        self.revive()
        self._synced()

    def sync_all(self) -> None:
        """Everything becomes durable, as after ``sync``: a disk set up before the test."""
        for node in self._inodes.values():
            node.synced, node.durable = node.data, dict(node.entries)
        self._pending.clear()
        self._synced()

    def durable_files(self, directory: str) -> dict[str, bytes]:
        """The files a power loss would leave in ``directory``: name -> durable bytes."""
        return self._files(directory, durable=True)

    def files(self, directory: str) -> dict[str, bytes]:
        """The files a process sees in ``directory``: name -> bytes."""
        return self._files(directory, durable=False)

    def _files(self, directory: str, *, durable: bool) -> dict[str, bytes]:
        ino = self._lookup(directory, durable=durable)
        if ino is None or not self._inodes[ino].is_dir:
            return {}
        entries = self._inodes[ino].listing(durable).items()
        return {
            name: self._inodes[i].synced if durable else self._inodes[i].data
            for name, i in entries
            if not self._inodes[i].is_dir
        }

    @contextlib.contextmanager
    def patch(self, module: ModuleType | str) -> Iterator[None]:
        """Run ``module``'s ``os.*`` and ``open`` on this model while the context is open."""
        with (
            mock.patch.object(_module(module), "os", self.os_shim()),
            mock.patch.object(_module(module), "open", self.open, create=True),
        ):
            yield

    def os_shim(self) -> SimpleNamespace:
        """The part of ``os`` the model implements, ``os.path`` included."""
        path = SimpleNamespace(
            exists=self.exists, isdir=self.isdir, join=posixpath.join, split=posixpath.split,
            dirname=posixpath.dirname, basename=posixpath.basename, abspath=posixpath.abspath,
            normpath=posixpath.normpath,
        )  # fmt: skip
        return SimpleNamespace(
            path=path, sep="/", fspath=os.fspath, O_RDONLY=os.O_RDONLY,
            O_DIRECTORY=getattr(os, "O_DIRECTORY", 0o200000),
            open=self.os_open, close=self.close, fsync=self.fsync, replace=self.replace,
            rename=self.replace, unlink=self.unlink, remove=self.unlink, listdir=self.listdir,
            mkdir=self.mkdir, makedirs=self.makedirs,
        )  # fmt: skip

    # -- system calls ----------------------------------------------------------------------

    def open(self, path: str, mode: str = "r", *args: Any, **kwargs: Any) -> ModelFile:
        """``open()`` for binary modes ``rb``, ``wb`` and ``xb``."""
        if mode not in ("rb", "wb", "xb"):
            raise NotImplementedError(f"the POSIX model opens files in rb, wb or xb, not {mode}")
        path = os.fspath(path)
        if mode == "rb":
            self._syscall("read", path, changes=False)
            ino = self._resolve(path)
            if self._inodes[ino].is_dir:
                raise _error(errno.EISDIR, path)
            return ModelFile(self, self._new_fd(ino), ino, writable=False)
        self._syscall("create", path)
        parent, name = self._parent(path)
        existing = self._inodes[parent].entries.get(name)
        if existing is not None and mode == "xb":
            raise _error(errno.EEXIST, path)
        if existing is not None and self._inodes[existing].is_dir:
            raise _error(errno.EISDIR, path)
        if existing is None:
            existing = self._new_inode(is_dir=False)
            self._change(((parent, name, existing),))
        self._inodes[existing].data = b""
        return ModelFile(self, self._new_fd(existing), existing, writable=True)

    def os_open(self, path: str, flags: int, mode: int = 0o777) -> int:
        """``os.open()``, read-only: enough to fsync a directory."""
        self._syscall("open", path, changes=False)
        return self._new_fd(self._resolve(path))

    def close(self, fd: int) -> None:
        if self.dead:  # a dead process closes nothing
            return
        if self._fds.pop(fd, None) is None:
            raise _error(errno.EBADF, str(fd))

    def fsync(self, fd: int) -> None:
        """A file's bytes, or a directory's entries, become durable."""
        ino = self._fds.get(fd)
        node = None if ino is None else self._inodes[ino]
        kind = "fsync" if node is None else "fsync dir" if node.is_dir else "fsync file"
        self._syscall(kind, str(fd) if ino is None else self._path_of(ino))
        if ino is None or node is None:
            raise _error(errno.EBADF, str(fd))
        if node.is_dir:
            node.durable = dict(node.entries)
            self._pending = [
                left for op in self._pending if (left := tuple(c for c in op if c[0] != ino))
            ]
        else:
            node.synced = node.data
        self._synced()

    def replace(self, src: str, dst: str) -> None:
        """``os.replace()``: atomic for processes; durable once both directories are fsynced."""
        src, dst = os.fspath(src), os.fspath(dst)
        self._syscall("replace", f"{src} -> {dst}")
        ino = self._resolve(src)
        (src_dir, src_name), (dst_dir, dst_name) = self._parent(src), self._parent(dst)
        target = self._inodes[dst_dir].entries.get(dst_name)
        if target is not None and self._inodes[target].is_dir != self._inodes[ino].is_dir:
            raise _error(errno.EISDIR if self._inodes[target].is_dir else errno.ENOTDIR, dst)
        if (src_dir, src_name) == (dst_dir, dst_name):
            return
        # The new name first: a prefix of a cross-directory rename never loses the file.
        self._change(((dst_dir, dst_name, ino), (src_dir, src_name, None)))

    def unlink(self, path: str) -> None:
        path = os.fspath(path)
        self._syscall("unlink", path)
        parent, name = self._parent(path)
        ino = self._inodes[parent].entries.get(name)
        if ino is None:
            raise _error(errno.ENOENT, path)
        if self._inodes[ino].is_dir:
            raise _error(errno.EISDIR, path)
        self._change(((parent, name, None),))

    def mkdir(self, path: str, mode: int = 0o777) -> None:
        path = os.fspath(path)
        self._syscall("mkdir", path)
        parent, name = self._parent(path)
        if name in self._inodes[parent].entries:
            raise _error(errno.EEXIST, path)
        self._change(((parent, name, self._new_inode(is_dir=True)),))

    def makedirs(self, path: str, mode: int = 0o777, exist_ok: bool = False) -> None:
        path = posixpath.normpath(os.fspath(path))
        if self.isdir(path):
            if not exist_ok:
                raise _error(errno.EEXIST, path)
            return
        parent = posixpath.dirname(path)
        if parent != path and not self.exists(parent):
            self.makedirs(parent, mode, exist_ok=True)
        self.mkdir(path, mode)

    def listdir(self, path: str) -> list[str]:
        self._syscall("listdir", path, changes=False)
        return list(self._inodes[self._resolve(path, want_dir=True)].entries)

    def exists(self, path: str) -> bool:
        self._syscall("stat", path, changes=False)
        return self._lookup(os.fspath(path), durable=False) is not None

    def isdir(self, path: str) -> bool:
        self._syscall("stat", path, changes=False)
        ino = self._lookup(os.fspath(path), durable=False)
        return ino is not None and self._inodes[ino].is_dir

    # -- internals -------------------------------------------------------------------------

    def _syscall(self, call: str, path: str, *, changes: bool = True) -> None:
        """Every call: a dead process gets no answer; an armed crash strikes before a change."""
        if self.dead:
            raise ProcessCrashed(f"the process is dead ({call} {path})")
        if not changes:
            return
        if self._crash_in is not None:
            if self._crash_in == 0:
                self.crash()
                raise ProcessCrashed(f"crash before {call} {path}")
            self._crash_in -= 1
        self.trace.append((call, path))

    def _synced(self) -> None:
        for listener in self.on_sync:
            listener()

    def _change(self, change: tuple[_Change, ...]) -> None:
        self._apply(change, durable=False)
        self._pending.append(change)

    def _apply(self, change: tuple[_Change, ...], *, durable: bool) -> None:
        for directory, name, ino in change:
            listing = self._inodes[directory].listing(durable)
            if ino is None:
                listing.pop(name, None)
            else:
                listing[name] = ino

    def _reachable(self, *, durable: bool) -> set[int]:
        seen, todo = {_ROOT}, [_ROOT]
        while todo:
            node = self._inodes[todo.pop()]
            for ino in node.listing(durable).values():
                if ino not in seen:
                    seen.add(ino)
                    if self._inodes[ino].is_dir:
                        todo.append(ino)
        return seen

    def _lookup(self, path: str, *, durable: bool) -> int | None:
        if not path.startswith("/"):
            raise ValueError(f"the POSIX model takes absolute paths, not {path!r}")
        ino = _ROOT
        for part in posixpath.normpath(path).split("/"):
            if not part:
                continue
            node = self._inodes[ino]
            if not node.is_dir:
                return None
            found = node.listing(durable).get(part)
            if found is None:
                return None
            ino = found
        return ino

    def _resolve(self, path: str, *, want_dir: bool = False) -> int:
        path = os.fspath(path)
        parent = posixpath.dirname(posixpath.normpath(path))
        ino = self._lookup(path, durable=False)
        if ino is None:
            parent_ino = self._lookup(parent, durable=False)
            if parent_ino is not None and not self._inodes[parent_ino].is_dir:
                raise _error(errno.ENOTDIR, path)
            raise _error(errno.ENOENT, path)
        if want_dir and not self._inodes[ino].is_dir:
            raise _error(errno.ENOTDIR, path)
        return ino

    def _parent(self, path: str) -> tuple[int, str]:
        parent, name = posixpath.split(posixpath.normpath(path))
        return self._resolve(parent, want_dir=True), name

    def _path_of(self, ino: int) -> str:
        """A name of ``ino`` as processes see it (for the trace)."""
        if ino == _ROOT:
            return "/"
        todo = [(_ROOT, "")]
        while todo:
            directory, prefix = todo.pop()
            for name, child in self._inodes[directory].entries.items():
                if child == ino:
                    return f"{prefix}/{name}"
                if self._inodes[child].is_dir:
                    todo.append((child, f"{prefix}/{name}"))
        return f"<unlinked inode {ino}>"

    def _new_inode(self, *, is_dir: bool) -> int:
        ino = self._next_ino
        self._next_ino += 1
        self._inodes[ino] = _Inode(is_dir=is_dir)
        return ino

    def _new_fd(self, ino: int) -> int:
        fd = self._next_fd
        self._next_fd += 1
        self._fds[fd] = ino
        return fd


class ModelFile:
    """A binary file object: ``write`` fills a buffer in the process, ``flush`` (or close)
    hands it to the page cache, where other processes see it; only fsync makes it durable."""

    def __init__(self, model: PosixModel, fd: int, ino: int, *, writable: bool) -> None:
        self._model, self._fd, self._ino, self._writable = model, fd, ino, writable
        self._buffer = b""
        self.closed = False

    def fileno(self) -> int:
        return self._fd

    def read(self, size: int = -1) -> bytes:
        self._model._syscall("read", str(self._fd), changes=False)
        data = self._model._inodes[self._ino].data
        return data if size < 0 else data[:size]

    def write(self, data: bytes) -> int:
        if not self._writable:
            raise OSError(errno.EBADF, "not open for writing")
        self._buffer += bytes(data)
        return len(data)

    def flush(self) -> None:
        if self._buffer:
            self._model._syscall("write", self._model._path_of(self._ino))
            node = self._model._inodes[self._ino]
            node.data += self._buffer
            self._buffer = b""

    def close(self) -> None:
        if self.closed or self._model.dead:
            self.closed = True
            return
        try:
            self.flush()
        finally:
            self.closed = True
            self._model.close(self._fd)

    def __enter__(self) -> ModelFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _error(code: int, path: str) -> OSError:
    return OSError(code, os.strerror(code), path)  # FileNotFoundError for ENOENT, and so on


def _module(module: ModuleType | str) -> ModuleType:
    return __import__(module, fromlist=["_"]) if isinstance(module, str) else module
