"""The decision store never acts on a name a power loss can undo, whatever its root looks
like; prune's deletes reach the disk in their order. Each case is a way a handle could answer
from an unsettled directory, found in review of the settle fix. The real
``checkpoint._filesystem`` runs on ``tests/support/posix_model.py``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from posix_model import PosixModel, ProcessCrashed

from checkpoint import _filesystem
from checkpoint.model import Committable, Snapshot
from checkpoint.store import SnapshotStore


def snapshot(cid: int) -> Snapshot:
    committable = Committable(f"sink-0-{cid}", 7, 0, 10, (("out", 0),))
    return Snapshot(cid, "pipeline", (committable,), (("in", 0, cid * 100),), 1, 2)


@pytest.fixture
def disk() -> Iterator[PosixModel]:
    model = PosixModel()
    model.makedirs("/cp")
    model.sync_all()
    with model.patch(_filesystem):
        yield model


def _write_crashing_before_dir_fsync(disk: PosixModel, location: str, cid: int) -> None:
    """A writer that dies between os.replace and the directory fsync."""
    for n in range(20):
        disk.crash_after(n)
        try:
            SnapshotStore(location).write(snapshot(cid))
        except ProcessCrashed:
            disk.revive()
            if disk.trace and disk.trace[-1][0] == "replace":
                return
            continue
        raise AssertionError("no crash point before the directory fsync")
    raise AssertionError("unreachable")


def test_subtree_root_with_trailing_slash_still_settles(disk: PosixModel) -> None:
    """A subtree filesystem rooted at the store gives the root '/cp/sink/' (a trailing
    slash): the handle must still settle before it answers."""
    import pyarrow.fs

    SnapshotStore("/cp/sink").write(snapshot(1))
    _write_crashing_before_dir_fsync(disk, "/cp/sink", 2)
    assert "2.snapshot.json" in disk.files("/cp/sink")
    assert "2.snapshot.json" not in disk.durable_files("/cp/sink")

    sub = pyarrow.fs.SubTreeFileSystem("/cp/sink", pyarrow.fs.LocalFileSystem())
    reader = SnapshotStore("/", filesystem=sub)
    seen = reader.get(2)  # a new process acts on it: R1 commits its transactions
    assert seen == snapshot(2)
    disk.power_loss()
    assert SnapshotStore("/cp/sink").get(2) == seen  # what it acted on survived


def test_a_handle_that_saw_no_root_settles_once_the_root_appears(disk: PosixModel) -> None:
    """A handle that first found no root has settled nothing: once a writer created the root
    and died before its directory fsync, the handle settles before it answers."""
    reader = SnapshotStore("/cp/sink")
    assert reader.checkpoint_ids() == []  # no root yet
    _write_crashing_before_dir_fsync(disk, "/cp/sink", 1)
    seen = reader.get(1)
    assert seen == snapshot(1)
    disk.power_loss()
    assert SnapshotStore("/cp/sink").get(1) == seen


def test_prune_makes_each_delete_durable_before_the_next(disk: PosixModel) -> None:
    """A decision is deleted before its confirmation; without a directory fsync between the
    two unlinks a power loss could keep the second alone, and bring the old decision back
    unconfirmed, for recovery to commit again."""
    store = SnapshotStore("/cp/sink", retain=1)
    for cid in (1, 2):
        store.write(snapshot(cid))
        store.confirm(cid, confirmed_at_ms=3)
    begun = len(disk.trace)
    assert store.prune() == [1]
    assert disk.trace[begun:] == [
        ("unlink", "/cp/sink/1.snapshot.json"),
        ("fsync dir", "/cp/sink"),
        ("unlink", "/cp/sink/1.confirmed.json"),
        ("fsync dir", "/cp/sink"),
    ]
    disk.power_loss()
    assert SnapshotStore("/cp/sink").unconfirmed_ids() == []
