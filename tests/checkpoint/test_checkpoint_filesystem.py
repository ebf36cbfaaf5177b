"""Locations are resolved as Hadoop (so Spark) resolves a checkpoint location.

Spark logs its checkpoint where Hadoop's ``Path`` says; a store that read the same string
otherwise would keep its decisions on other storage, where a restarted driver may not find
them. Each case below was checked against Hadoop 3.5's ``Path`` and ``FileSystem``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from checkpoint.errors import ConfigError
from checkpoint.model import Committable, Snapshot
from checkpoint.store import SnapshotStore, read_location


def snapshot(cid: int) -> Snapshot:
    committable = Committable(f"sink-0-{cid}", 7, 0, 10, (("out", 0),))
    return Snapshot(cid, "pipeline", (committable,), (("in", 0, cid * 100),), 1, 2)


@pytest.fixture(autouse=True)
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Another working directory: a location misread as relative lands here, not in the repo."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return cwd


# -- file: ------------------------------------------------------------------------------------


@pytest.mark.parametrize("form", ["file:{}", "file://{}", "file:///{}"])
def test_a_file_uri_is_the_absolute_local_path_taken_literally(tmp_path: Path, form: str) -> None:
    """file:/a, file:///a (and file:////a) are the local /a; %20 stays %20, as in Hadoop."""
    directory = tmp_path / "checkpoints" / "orders%20q"
    SnapshotStore(form.format(directory)).write(snapshot(1))
    assert (directory / "1.snapshot.json").is_file()
    assert SnapshotStore(directory).latest() == snapshot(1)


def test_read_location_reads_a_file_uri_with_one_slash(tmp_path: Path) -> None:
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "3").write_text("v1")
    assert read_location(f"file:{tmp_path}/offsets/3") is not None
    assert read_location(f"file:{tmp_path}/offsets/4") is None


@pytest.mark.parametrize("host", ["localhost", "tmp"])
def test_a_file_uri_with_a_host_is_refused(host: str) -> None:
    """Hadoop: 'Wrong FS: file://tmp/a, expected: file:///'. Read as /a it would be elsewhere."""
    with pytest.raises(ConfigError) as refused:
        SnapshotStore(f"file://{host}/checkpoints/q")
    message = str(refused.value)
    assert f"'file://{host}/checkpoints/q'" in message and f"host '{host}'" in message
    assert "file:/checkpoints/q or file:///checkpoints/q" in message


@pytest.mark.parametrize("location", ["file:checkpoints/q", "hdfs:checkpoints/q"])
def test_a_relative_path_in_a_uri_is_refused(location: str) -> None:
    """Hadoop: 'Relative path in absolute URI'."""
    with pytest.raises(ConfigError) as refused:
        SnapshotStore(location)
    message = str(refused.value)
    assert f"{location!r} is a relative path" in message
    assert f"{location.split(':')[0]}:/checkpoints/q" in message


# -- hdfs: without a namenode ------------------------------------------------------------------


@pytest.fixture
def default_namenode(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, int]]]:
    """pyarrow's ``HadoopFileSystem``, replaced by an in-memory filesystem; yields its calls."""
    import fsspec
    import pyarrow.fs

    memory = fsspec.filesystem("memory")
    calls: list[tuple[str, int]] = []

    def hadoop_filesystem(host: str, port: int = 8020, **_: object) -> pyarrow.fs.FileSystem:
        calls.append((host, port))
        return pyarrow.fs.PyFileSystem(pyarrow.fs.FSSpecHandler(memory))

    monkeypatch.setattr(pyarrow.fs, "HadoopFileSystem", hadoop_filesystem)
    yield calls
    for path in memory.ls("/", detail=False):
        if path.lstrip("/").startswith("kafka-eos-hdfs-"):
            memory.rm(path, recursive=True)


@pytest.mark.parametrize("form", ["hdfs:{}", "hdfs://{}"])
def test_an_hdfs_uri_without_namenode_is_the_path_on_the_default_filesystem(
    default_namenode: list[tuple[str, int]], elsewhere: Path, form: str
) -> None:
    path = f"/kafka-eos-hdfs-{uuid.uuid4().hex}/checkpoints/q"
    SnapshotStore(form.format(path)).write(snapshot(1))
    assert default_namenode == [("default", 0)]  # libhdfs's name for fs.defaultFS
    assert read_location(form.format(f"{path}/1.snapshot.json")) is not None
    assert SnapshotStore(form.format(path)).latest() == snapshot(1)
    assert read_location(form.format(f"{path}/2.snapshot.json")) is None
    assert list(elsewhere.iterdir()) == []  # nothing on the local disk


def test_an_hdfs_default_filesystem_that_cannot_be_opened_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import pyarrow.fs

    def no_libhdfs(host: str, port: int = 8020, **_: object) -> pyarrow.fs.FileSystem:
        raise OSError("Unable to load libjvm\ndlopen(/usr/lib/jvm/default-java/libjvm.so) failed")

    monkeypatch.setattr(pyarrow.fs, "HadoopFileSystem", no_libhdfs)
    with pytest.raises(ConfigError) as refused:
        read_location("hdfs:/checkpoints/q/offsets/3")
    message = str(refused.value)
    assert "location 'hdfs:/checkpoints/q/offsets/3'" in message
    assert "default filesystem (fs.defaultFS)" in message
    assert "cannot be opened: Unable to load libjvm. " in message  # the first line only
    assert "hdfs://namenode:8020/checkpoints/q/offsets/3" in message
    assert "HADOOP_CONF_DIR" in message and "CLASSPATH=$(hadoop classpath --glob)" in message
