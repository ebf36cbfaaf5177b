"""Snapshot store: atomic write-once files, checksums, retention, local paths and URIs."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from posix_model import PosixModel, ProcessCrashed

from checkpoint import _filesystem
from checkpoint._filesystem import canonical_uri
from checkpoint.errors import (
    ConfigError,
    CorruptSnapshotError,
    ProtocolError,
    UnsupportedFormatVersion,
)
from checkpoint.model import AcceptedLoss, Committable, Confirmation, Snapshot
from checkpoint.store import SnapshotStore, read_location


class SimulatedCrash(BaseException):
    """The process dies: not an Exception, so no ``except Exception`` handles it."""


def snapshot(cid: int, records: int = 10) -> Snapshot:
    committable = Committable(f"sink-0-{cid}", 7, 0, records, (("out", 0),))
    return Snapshot(cid, "pipeline", (committable,), (("in", 0, cid * 100),), 1, 2)


def decide(store: SnapshotStore, *ids: int, confirm: bool = True) -> None:
    for cid in ids:
        store.write(snapshot(cid))
        if confirm:
            store.confirm(cid, confirmed_at_ms=3)


def test_write_get_latest(store: SnapshotStore) -> None:
    assert store.latest() is None and store.get(0) is None and store.checkpoint_ids() == []
    decide(store, 2, 10, 9)
    assert store.checkpoint_ids() == [2, 9, 10]  # numeric, not lexicographic, order
    assert store.latest() == snapshot(10) and store.get(9) == snapshot(9)
    assert store.contains(2) and not store.contains(3)


def test_file_is_versioned_json_with_an_embedded_sha256(store: SnapshotStore, store_dir: Path):
    decide(store, 4)
    assert sorted(os.listdir(store_dir)) == ["4.confirmed.json", "4.snapshot.json"]
    data = json.loads((store_dir / "4.snapshot.json").read_text())
    assert (data["version"], data["kind"], len(data["sha256"])) == (2, "snapshot", 64)


def test_crash_between_temp_write_and_rename_leaves_the_old_state(
    store: SnapshotStore, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    decide(store, 1)

    def crash(src: str, dst: str) -> None:
        raise SimulatedCrash(f"killed before rename of {src}")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(SimulatedCrash):
        store.write(snapshot(2))
    monkeypatch.undo()
    assert store.checkpoint_ids() == [1] and store.latest() == snapshot(1)
    assert not (store_dir / "2.snapshot.json").exists()


def test_leftover_temporary_files_are_ignored_then_pruned(store: SnapshotStore, store_dir: Path):
    decide(store, 1)
    leftover = store_dir / ".2.snapshot.json.tmp-0123abcd"
    leftover.write_text('{"version": 1, "kind": "snaps')  # torn: the writer died mid-write
    assert store.checkpoint_ids() == [1] and store.latest() == snapshot(1)
    decide(store, 2)
    store.prune()
    assert not leftover.exists()


@pytest.fixture
def disk() -> Iterator[PosixModel]:
    """The local backend's ``os`` and ``open`` on a model disk that can lose power."""
    model = PosixModel()
    with model.patch(_filesystem):
        yield model


def test_a_write_fsyncs_the_temporary_before_the_rename_and_the_directory_after(
    disk: PosixModel,
) -> None:
    store = SnapshotStore("/cp/sink")
    store.write(snapshot(1))
    store.checkpoint_ids()  # the handle settles once the root exists (test_..._settle.py)
    disk.trace.clear()
    store.write(snapshot(2))
    final = "/cp/sink/2.snapshot.json"
    [(_, temp)] = [(call, path) for call, path in disk.trace if call == "create"]
    assert temp.startswith("/cp/sink/.2.snapshot.json.tmp-")
    # The bytes are durable before the name points at them; the name, once its directory is.
    assert disk.trace == [
        ("create", temp),
        ("write", temp),
        ("fsync file", temp),
        ("replace", f"{temp} -> {final}"),
        ("fsync dir", "/cp/sink"),
    ]


def changes_of_a_write(location: str, *earlier: int) -> int:
    """How many changes to the disk (the crash points) a fresh handle makes to write a
    decision after ``earlier``."""
    model = PosixModel()
    with model.patch(_filesystem):
        for cid in earlier:
            SnapshotStore(location).write(snapshot(cid))
        before = len(model.trace)
        SnapshotStore(location).write(snapshot(9))
        return len(model.trace) - before


@pytest.mark.parametrize("crash_at", range(changes_of_a_write("/cp/sink", 1) + 1))
def test_a_crash_anywhere_in_a_write_then_a_power_loss_keeps_what_was_read(
    disk: PosixModel, crash_at: int
) -> None:
    """Kill the writer before each change a write makes to the disk, or just after it; start
    a new process; let the power fail: the decision is there whole or not at all, what the new
    process read survives (it may act on it: commit what a decision names), and a returned
    write survives."""
    SnapshotStore("/cp/sink").write(snapshot(1))
    disk.crash_after(crash_at)
    try:
        SnapshotStore("/cp/sink").write(snapshot(2))
        returned = True
    except ProcessCrashed:
        returned = False
    disk.revive()  # a new process; the page cache is still there
    seen = SnapshotStore("/cp/sink").checkpoint_ids()
    disk.power_loss()
    after = SnapshotStore("/cp/sink")
    assert after.checkpoint_ids() == seen and seen[0] == 1
    assert after.get(2) == (snapshot(2) if returned or 2 in seen else None)


@pytest.mark.parametrize("crash_at", range(changes_of_a_write("/a/b/c/sink") + 1))
def test_a_crash_while_the_first_write_creates_the_directories_loses_nothing_later(
    disk: PosixModel, crash_at: int
) -> None:
    """The store creates every missing level of its location: a crash between two of them
    must not leave a level whose entry a power loss can drop with the decisions below it."""
    disk.crash_after(crash_at)
    with contextlib.suppress(ProcessCrashed):
        SnapshotStore("/a/b/c/sink").write(snapshot(1))
    disk.revive()
    SnapshotStore("/a/b/c/sink").write(snapshot(2))
    disk.power_loss()
    assert SnapshotStore("/a/b/c/sink").get(2) == snapshot(2)


def test_a_renamed_decision_without_its_directory_fsync_is_undone_by_a_power_loss(
    disk: PosixModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the test above relies on: the model loses an un-fsynced rename."""
    SnapshotStore("/cp/sink").write(snapshot(1))
    monkeypatch.setattr(_filesystem, "_fsync_directory", lambda directory: None)
    SnapshotStore("/cp/sink").write(snapshot(2))
    monkeypatch.undo()
    disk.power_loss()
    assert SnapshotStore("/cp/sink").checkpoint_ids() == [1]


def test_truncated_file_is_rejected_naming_the_file(store: SnapshotStore, store_dir: Path):
    decide(store, 1, 2)
    path = store_dir / "2.snapshot.json"
    path.write_bytes(path.read_bytes()[:40])
    with pytest.raises(CorruptSnapshotError, match="not valid JSON") as raised:
        store.latest()
    assert str(path) in str(raised.value) and raised.value.path == str(path)
    assert store.get(1) == snapshot(1)  # the other decisions still read


def test_damaged_content_is_caught_by_the_checksum(store: SnapshotStore, store_dir: Path):
    decide(store, 1)
    path = store_dir / "1.snapshot.json"
    path.write_text(path.read_text().replace('"record_count": 10', '"record_count": 11'))
    with pytest.raises(CorruptSnapshotError, match="sha256 mismatch") as raised:
        store.get(1)
    assert str(path) in str(raised.value)


def test_a_newer_format_version_is_rejected_naming_the_file(
    store: SnapshotStore, store_dir: Path
) -> None:
    from checkpoint.store import _checksum

    data = {**snapshot(1).to_dict(), "version": 3}
    data["sha256"] = _checksum(data)
    store_dir.mkdir(parents=True)
    (store_dir / "1.snapshot.json").write_text(json.dumps(data))
    with pytest.raises(UnsupportedFormatVersion, match="version 3") as raised:
        store.latest()
    assert raised.value.path == str(store_dir / "1.snapshot.json")


def test_decisions_are_write_once(store: SnapshotStore) -> None:
    decide(store, 1)
    store.write(snapshot(1))  # the same decision again: a no-op
    with pytest.raises(ProtocolError, match="already decided"):
        store.write(snapshot(1, records=99))


def test_confirmations(store: SnapshotStore) -> None:
    with pytest.raises(ProtocolError, match="no decision"):
        store.confirm(1)
    decide(store, 1, 2, confirm=False)
    store.confirm(1)
    store.confirm(1)  # idempotent
    assert store.is_confirmed(1) and not store.is_confirmed(2)
    assert store.unconfirmed_ids() == [2]


def test_an_accepted_loss_confirms_the_decision_and_reads_back(store: SnapshotStore) -> None:
    decide(store, 1, confirm=False)
    lost = snapshot(1).committables
    loss = AcceptedLoss(lost, "INC-42: aborted on its timeout", "ops@host-1")
    store.confirm(1, confirmed_at_ms=5, accepted_loss=loss)
    assert store.confirmation(1) == Confirmation(1, 5, loss)
    assert store.unconfirmed_ids() == [] and store.confirmation(2) is None
    store.confirm(1)  # a plain confirmation never replaces the record of the loss
    assert store.confirmation(1) == Confirmation(1, 5, loss)


def test_a_loss_is_accepted_only_for_an_unconfirmed_decision_that_holds_it(
    store: SnapshotStore,
) -> None:
    decide(store, 1)
    decide(store, 2, confirm=False)
    (held,) = snapshot(2).committables
    with pytest.raises(ProtocolError, match="already confirmed"):
        store.confirm(1, confirmed_at_ms=5, accepted_loss=AcceptedLoss((held,), "x", "ops"))
    other = Committable(held.transactional_id, held.producer_id, held.epoch + 1, 10, (("out", 0),))
    with pytest.raises(ProtocolError, match=r"its decision in .*2\.snapshot\.json holds"):
        store.confirm(2, confirmed_at_ms=5, accepted_loss=AcceptedLoss((other,), "x", "ops"))
    assert store.unconfirmed_ids() == [2] and store.confirmation(1) == Confirmation(1, 3)


def test_a_version_1_confirmation_still_confirms(store: SnapshotStore, store_dir: Path) -> None:
    """Written by a kafka-eos from before accepted losses: recovery must still skip it."""
    from checkpoint.store import _checksum

    decide(store, 1, confirm=False)
    data = {"version": 1, "kind": "confirmation", "checkpoint_id": 1, "confirmed_at_ms": 3}
    data["sha256"] = _checksum(data)
    (store_dir / "1.confirmed.json").write_text(json.dumps(data))
    assert store.confirmation(1) == Confirmation(1, 3) and store.unconfirmed_ids() == []


def test_retention_keeps_the_newest_n(store: SnapshotStore, store_dir: Path) -> None:
    decide(store, *range(6))
    assert store.prune() == [0, 1, 2]
    assert store.checkpoint_ids() == [3, 4, 5]
    assert sorted(os.listdir(store_dir)) == sorted(
        f"{i}.{kind}.json" for i in (3, 4, 5) for kind in ("snapshot", "confirmed")
    )


def test_retention_never_deletes_an_unconfirmed_decision(store: SnapshotStore) -> None:
    decide(store, 0)
    decide(store, 1, confirm=False)
    decide(store, 2, 3, 4, 5)
    assert store.prune() == [0, 2]
    assert store.checkpoint_ids() == [1, 3, 4, 5] and store.unconfirmed_ids() == [1]


def test_prune_removes_orphan_confirmations(store: SnapshotStore, store_dir: Path) -> None:
    decide(store, *range(5))
    (store_dir / "0.snapshot.json").unlink()  # a crash between the two deletes of prune()
    store.prune()
    assert not (store_dir / "0.confirmed.json").exists()


@pytest.mark.parametrize("retain", [0, -1, 1.5])
def test_retain_must_be_positive(tmp_path: Path, retain: object) -> None:
    with pytest.raises(ConfigError, match="retain"):
        SnapshotStore(tmp_path, retain=retain)  # type: ignore[arg-type]


def test_memory_uri_goes_through_the_remote_path(memory_location: str) -> None:
    store = SnapshotStore(memory_location, retain=2)
    decide(store, 1, 2, 3)
    store.prune()
    reader = SnapshotStore(memory_location)  # a second instance: nothing is cached
    assert reader.checkpoint_ids() == [2, 3] and reader.latest() == snapshot(3)
    assert reader.is_confirmed(3) and reader.unconfirmed_ids() == []


def test_a_pyarrow_filesystem_can_be_passed_in(tmp_path: Path) -> None:
    import pyarrow.fs

    store = SnapshotStore(str(tmp_path / "arrow"), filesystem=pyarrow.fs.LocalFileSystem())
    decide(store, 1)
    assert SnapshotStore(tmp_path / "arrow").latest() == snapshot(1)
    assert [n for n in os.listdir(tmp_path / "arrow") if n.startswith(".")] == []


def test_file_uri_is_a_local_path(tmp_path: Path) -> None:
    decide(SnapshotStore(f"file://{tmp_path}/uri"), 1)
    assert SnapshotStore(tmp_path / "uri").latest() == snapshot(1)


def test_another_process_reads_what_this_one_wrote(store: SnapshotStore, store_dir: Path):
    decide(store, 5)
    code = (
        "import sys; from checkpoint.store import SnapshotStore; "
        "s = SnapshotStore(sys.argv[1]); s.confirm(6) if s.contains(6) else None; "
        "print(s.latest().checkpoint_id)"
    )
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    decide(store, 6, confirm=False)
    out = subprocess.run(
        [sys.executable, "-c", code, str(store_dir)], capture_output=True, text=True, env=env
    )
    assert out.stdout.strip() == "6", out.stderr
    assert store.is_confirmed(6)


def test_a_renamed_file_is_rejected_naming_both_ids(store: SnapshotStore, store_dir: Path):
    decide(store, 1)
    os.rename(store_dir / "1.snapshot.json", store_dir / "2.snapshot.json")
    os.rename(store_dir / "1.confirmed.json", store_dir / "3.confirmed.json")
    with pytest.raises(
        CorruptSnapshotError, match="holds checkpoint 1 but its name says checkpoint 2"
    ):
        store.get(2)
    with pytest.raises(
        CorruptSnapshotError, match="holds checkpoint 1 but its name says checkpoint 3"
    ):
        store.is_confirmed(3)


def record_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Patch os.fsync to record ("file" or "dir", path) of every fsync."""
    synced: list[tuple[str, str]] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        kind = "dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file"
        synced.append((kind, os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return synced


def test_every_directory_level_the_store_creates_is_fsynced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tmp_path = Path(os.path.realpath(tmp_path))  # /proc/self/fd names resolve symlinks
    synced = record_fsyncs(monkeypatch)
    SnapshotStore(tmp_path / "a" / "b" / "c").write(snapshot(1))
    dirs = {path for kind, path in synced if kind == "dir"}
    # Each new level's entry is in its parent; c holds the renamed file.
    assert {str(tmp_path), str(tmp_path / "a"), str(tmp_path / "a" / "b")} <= dirs
    assert str(tmp_path / "a" / "b" / "c") in dirs


@pytest.mark.parametrize("kind", ["pyarrow", "subtree", "fsspec"])
def test_a_local_filesystem_object_gets_fsync_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    import fsspec
    import pyarrow.fs

    tmp_path = Path(os.path.realpath(tmp_path))  # /proc/self/fd names resolve symlinks
    location, filesystem = str(tmp_path / "store"), pyarrow.fs.LocalFileSystem()
    if kind == "subtree":
        location, filesystem = "store", pyarrow.fs.SubTreeFileSystem(str(tmp_path), filesystem)
    elif kind == "fsspec":
        handler = pyarrow.fs.FSSpecHandler(fsspec.filesystem("file"))
        filesystem = pyarrow.fs.PyFileSystem(handler)
    synced = record_fsyncs(monkeypatch)
    SnapshotStore(location, filesystem=filesystem).write(snapshot(1))
    assert ("dir", str(tmp_path / "store")) in synced
    assert [k for k, path in synced if path.startswith(f"{tmp_path}/store/.")] == ["file"]
    assert SnapshotStore(tmp_path / "store").latest() == snapshot(1)


def test_read_location_resolves_as_the_store_does(tmp_path: Path) -> None:
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "3").write_text("v1")
    assert read_location(tmp_path / "offsets" / "3") == b"v1"
    assert read_location(f"file://{tmp_path}/offsets/3") == b"v1"
    assert read_location(tmp_path / "offsets" / "4") is None
    SnapshotStore("memory://kafka-eos-exists/cp").write(snapshot(1))
    assert read_location("memory://kafka-eos-exists/cp/1.snapshot.json") is not None
    assert read_location("memory://kafka-eos-exists/elsewhere") is None


@pytest.mark.parametrize("scheme", ["s3a", "s3n"])
def test_hadoop_s3_schemes_name_the_s3_filesystem(scheme: str) -> None:
    """Spark users write s3a://; pyarrow knows the same buckets as s3://."""
    assert canonical_uri(f"{scheme}://bucket/cp") == "s3://bucket/cp"
    assert canonical_uri("gs://bucket/cp") == "gs://bucket/cp"
