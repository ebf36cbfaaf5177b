"""The POSIX crash-consistency model (tests/support/posix_model.py) the store is tested on:
what a process crash keeps, what a power loss keeps, and the shim that runs real code on it."""

from __future__ import annotations

import os

import pytest
from posix_model import PosixModel, ProcessCrashed


def write(disk: PosixModel, path: str, data: bytes, *, fsync: bool) -> None:
    with disk.open(path, "xb") as file:
        file.write(data)
        file.flush()
        if fsync:
            disk.fsync(file.fileno())


def fsync_dir(disk: PosixModel, path: str) -> None:
    fd = disk.os_open(path, os.O_RDONLY)
    disk.fsync(fd)
    disk.close(fd)


@pytest.fixture
def disk() -> PosixModel:
    model = PosixModel()
    model.makedirs("/d")
    model.sync_all()
    return model


def read(disk: PosixModel, path: str) -> bytes:
    with disk.open(path, "rb") as file:
        return file.read()


def test_a_process_crash_keeps_the_page_cache(disk: PosixModel) -> None:
    write(disk, "/d/f", b"data", fsync=False)
    disk.crash()
    disk.revive()
    assert read(disk, "/d/f") == b"data"


def test_a_power_loss_keeps_only_what_was_fsynced(disk: PosixModel) -> None:
    write(disk, "/d/synced", b"kept", fsync=True)
    write(disk, "/d/unsynced", b"lost", fsync=False)
    fsync_dir(disk, "/d")
    write(disk, "/d/no-entry", b"lost", fsync=True)  # its bytes are durable, its name is not
    disk.power_loss()
    assert disk.listdir("/d") == ["synced", "unsynced"]
    assert read(disk, "/d/synced") == b"kept"
    assert read(disk, "/d/unsynced") == b""  # the name survived, the bytes did not


def test_a_rename_is_durable_only_once_its_directory_is_fsynced(disk: PosixModel) -> None:
    write(disk, "/d/tmp", b"new", fsync=True)
    fsync_dir(disk, "/d")
    disk.replace("/d/tmp", "/d/final")
    assert disk.listdir("/d") == ["final"]
    disk.power_loss()
    assert disk.listdir("/d") == ["tmp"]
    disk.replace("/d/tmp", "/d/final")
    fsync_dir(disk, "/d")
    disk.power_loss()
    assert disk.listdir("/d") == ["final"] and read(disk, "/d/final") == b"new"


def test_a_new_directory_needs_its_parent_fsynced(disk: PosixModel) -> None:
    disk.makedirs("/d/a/b")
    write(disk, "/d/a/b/f", b"x", fsync=True)
    fsync_dir(disk, "/d/a/b")
    fsync_dir(disk, "/d/a")
    disk.power_loss()
    assert not disk.exists("/d/a")  # /d was never fsynced: the tree is gone
    assert disk.durable_files("/d/a/b") == {}


def test_unflushed_bytes_die_with_the_process(disk: PosixModel) -> None:
    file = disk.open("/d/f", "xb")
    file.write(b"buffered")
    disk.crash()
    file.close()  # a dead process closes nothing
    disk.revive()
    assert read(disk, "/d/f") == b""


def test_a_power_loss_may_keep_the_oldest_pending_directory_operations(disk: PosixModel) -> None:
    for name in ("a", "b", "c"):
        write(disk, f"/d/{name}", b"", fsync=False)
    disk.power_loss(keep=2)
    assert sorted(disk.listdir("/d")) == ["a", "b"]


def test_an_armed_crash_strikes_before_the_call_and_the_dead_process_runs_nothing(
    disk: PosixModel,
) -> None:
    write(disk, "/d/tmp", b"x", fsync=True)
    disk.crash_after(1)
    disk.mkdir("/d/e")
    assert disk.exists("/d/tmp")  # looking changes nothing: no crash point
    with pytest.raises(ProcessCrashed):
        disk.replace("/d/tmp", "/d/final")
    with pytest.raises(ProcessCrashed):
        disk.unlink("/d/tmp")  # no cleanup after death
    disk.revive()
    assert disk.listdir("/d") == ["tmp", "e"]


def test_errors_are_the_os_errors(disk: PosixModel) -> None:
    with pytest.raises(FileNotFoundError):
        disk.open("/d/missing", "rb")
    write(disk, "/d/f", b"", fsync=False)
    with pytest.raises(FileExistsError):
        disk.open("/d/f", "xb")
    with pytest.raises(NotADirectoryError):
        disk.listdir("/d/f")
    with pytest.raises(FileExistsError):
        disk.makedirs("/d")


def test_the_shim_runs_a_module_on_the_model(disk: PosixModel) -> None:
    import checkpoint._filesystem as module

    with disk.patch(module):
        module.os.makedirs("/d/e", exist_ok=True)
        with module.open("/d/e/f", "xb") as file:  # type: ignore[attr-defined]
            file.write(b"via the shim")
        with pytest.raises(AttributeError):
            module.os.rmdir("/d/e")  # not modelled: fails loudly, never reaches the real disk
    assert read(disk, "/d/e/f") == b"via the shim"
    assert module.os is os and not hasattr(module, "open")
