"""Filesystem backends of the snapshot store: a local disk with fsync, S3 with conditional puts
(checkpoint/_s3.py), or any pyarrow filesystem.

Internal: the store only needs read, atomic write, write-once create, exists, list and delete,
so that is all a backend offers. ``pyarrow.fs``, fsspec and boto3 are imported only for URIs,
never for local paths. Whatever names the local disk (a path, ``file:``, a pyarrow or fsspec
local filesystem) gets the fsyncing backend.

A location is read as Hadoop's ``Path`` (so Spark) reads a checkpoint location; otherwise the
store could keep its decisions on other storage than Spark's own checkpoint:

* no scheme: a local path;
* ``file:/a/b`` and ``file:///a/b``: the local ``/a/b``, taken literally (``%20`` stays
  ``%20``); ``file://host/a/b`` and ``file:a/b`` are refused, as Hadoop refuses them;
* ``hdfs:/a/b`` and ``hdfs:///a/b`` (no namenode): ``/a/b`` on the default filesystem
  (``fs.defaultFS``), pyarrow's ``HadoopFileSystem("default", 0)``;
* ``s3://``, ``s3a://``, ``s3n://``: boto3, for its conditional puts;
* any other URI: ``pyarrow.fs``, or fsspec for the schemes pyarrow lacks.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import re
import uuid
from typing import TYPE_CHECKING, NamedTuple, Protocol

from checkpoint.errors import ConfigError

if TYPE_CHECKING:
    import pyarrow.fs


class FileSystem(Protocol):
    """What the store needs from storage; ``write_atomic`` publishes all bytes or none, and
    ``create`` does too but raises FileExistsError if ``path`` exists (on S3, even if another
    writer put it since; elsewhere the store's single writer checked before)."""

    def read(self, path: str) -> bytes: ...
    def write_atomic(self, path: str, data: bytes) -> None: ...
    def create(self, path: str, data: bytes) -> None: ...
    def exists(self, path: str) -> bool: ...
    def list(self, directory: str) -> list[str]: ...
    def delete(self, path: str) -> None: ...


def open_filesystem(
    location: str, filesystem: pyarrow.fs.FileSystem | None
) -> tuple[FileSystem, str]:
    """The backend for ``location`` and the root path inside it."""
    if filesystem is not None:
        fs, root = filesystem, location
    else:
        uri = _split_uri(location)
        if uri is None or uri.scheme == "file":
            path = os.path.abspath(location if uri is None else _file_path(location, uri))
            return _LocalFileSystem(path), path
        if f"{uri.scheme}://" in ("s3://", *_S3_ALIASES):
            return _s3(location)
        fs, root = _from_uri(location, uri)
    root = root.rstrip("/")
    local = _local_path(fs, root)
    if local is not None:
        # The local disk behind a pyarrow or fsspec filesystem: pyarrow.fs has no fsync, and
        # without it a power loss can undo a rename that was reported done (a lost decision).
        return _LocalFileSystem(local), local
    return _ArrowFileSystem(fs, root), root


# Hadoop's S3 connectors (what Spark users write) name the buckets pyarrow and fsspec call s3://.
_S3_ALIASES = ("s3a://", "s3n://")


def canonical_uri(location: str) -> str:
    """``location`` as pyarrow and fsspec name it.

    >>> canonical_uri("s3a://bucket/checkpoints/q")
    's3://bucket/checkpoints/q'
    """
    for alias in _S3_ALIASES:
        if location.startswith(alias):
            return "s3://" + location.removeprefix(alias)
    return location


def canonical_location(location: str) -> str:
    """One spelling of each place, without touching storage: what a name derived from a
    checkpoint location is derived from, so a restart that spells it another way (a trailing
    slash, ``file:`` or not, ``s3a://`` for ``s3://``) keeps the name.

    >>> canonical_location("/a/b/"), canonical_location("file:///a//b")
    ('file:/a/b', 'file:/a/b')
    >>> canonical_location("s3a://bucket/q/"), canonical_location("hdfs:///q")
    ('s3://bucket/q', 'hdfs:/q')
    >>> canonical_location("hdfs://NameNode:8020/q"), canonical_location("s3://Data/q")
    ('hdfs://namenode:8020/q', 's3://Data/q')
    """
    uri = _split_uri(location)
    if uri is None or uri.scheme == "file":
        path = os.path.abspath(location if uri is None else _file_path(location, uri))
        return "file:" + os.path.normpath(path)
    path = posixpath.normpath(uri.path) if uri.path else ""
    path = "/" + path.lstrip("/") if path.startswith("/") else path.rstrip("/")
    scheme = "s3" if f"{uri.scheme}://" in _S3_ALIASES else uri.scheme
    if uri.authority is None:
        return f"{scheme}:{path}"
    # A host name's case is no part of it; a bucket's can be (S3's legacy buckets), and
    # merging two buckets would give two queries one prefix.
    authority = uri.authority.lower() if scheme in _HOST_SCHEMES else uri.authority
    return f"{scheme}://{authority}{'' if path == '/' else path}"


# Schemes whose authority is a host (and port): Hadoop's HDFS clients.
_HOST_SCHEMES = frozenset({"hdfs", "viewfs", "webhdfs", "swebhdfs"})


# Two characters at least: "C:" starts a Windows path, not a URI.
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+):")


class _Uri(NamedTuple):
    scheme: str  # lower case
    authority: str | None  # None when absent or empty, as in file:/a and file:///a
    path: str


def _split_uri(location: str) -> _Uri | None:
    """``location`` split as Hadoop's ``Path`` splits it, or None if it has no scheme.

    >>> _split_uri("hdfs:/a/b")
    _Uri(scheme='hdfs', authority=None, path='/a/b')
    >>> _split_uri("file:///a/b")
    _Uri(scheme='file', authority=None, path='/a/b')
    >>> _split_uri("s3a://bucket/q%20#1"), _split_uri("/a/b")
    (_Uri(scheme='s3a', authority='bucket', path='/q%20#1'), None)
    """
    match = _SCHEME.match(location)
    if match is None:
        return None
    rest = location[match.end() :]
    authority = None
    if rest.startswith("//") and len(rest) > 2:
        end = rest.find("/", 2)
        end = len(rest) if end < 0 else end
        authority, rest = rest[2:end] or None, rest[end:]
    return _Uri(match[1].lower(), authority, rest)


def _absolute_path(location: str, uri: _Uri) -> str:
    """The path of a URI without authority; Hadoop takes it literally (no %-decoding)."""
    if not uri.path.startswith("/"):
        raise ConfigError(
            f"location {location!r} is a relative path in a {uri.scheme}: URI, which Hadoop "
            f"and Spark refuse ('Relative path in absolute URI'). Write an absolute path, e.g. "
            f"{uri.scheme}:/checkpoints/q"
        )
    return "/" + uri.path.lstrip("/")  # file:////a is /a to Hadoop; //a need not be to POSIX


def _file_path(location: str, uri: _Uri) -> str:
    """The local path a ``file:`` URI names."""
    if uri.authority is not None:
        raise ConfigError(
            f"location {location!r} names the host {uri.authority!r}, but a file: URI has no "
            f"host: Hadoop and Spark refuse it ('Wrong FS'). Write the local path as "
            f"file:{uri.path} or file://{uri.path}"
        )
    return _absolute_path(location, uri)


def _s3(location: str) -> tuple[FileSystem, str]:
    try:
        from checkpoint._s3 import S3FileSystem  # boto3: only for S3 locations
    except ImportError as error:
        raise ConfigError(
            f"location {location!r} is on S3, whose decisions are written once by conditional "
            f"puts through boto3, which cannot be imported ({error}): pip install "
            "'kafka-eos[s3]' (boto3>=1.36) where the driver runs"
        ) from error
    root = canonical_uri(location).removeprefix("s3://").rstrip("/")
    return S3FileSystem(location), root


def _from_uri(location: str, uri: _Uri) -> tuple[pyarrow.fs.FileSystem, str]:
    import pyarrow.fs  # remote only: keeps local use free of the import cost

    if uri.scheme == "hdfs" and uri.authority is None:
        path = _absolute_path(location, uri)
        return _default_hdfs(location, path), path
    location = canonical_uri(location)
    try:
        return pyarrow.fs.FileSystem.from_uri(location)
    except (pyarrow.ArrowInvalid, pyarrow.ArrowNotImplementedError):
        from fsspec.core import url_to_fs  # schemes pyarrow lacks, e.g. memory://

        spec_fs, root = url_to_fs(location)
        return pyarrow.fs.PyFileSystem(pyarrow.fs.FSSpecHandler(spec_fs)), root


def _default_hdfs(location: str, path: str) -> pyarrow.fs.FileSystem:
    """The default filesystem, where Hadoop resolves ``hdfs:/path`` (no namenode named).

    pyarrow's own parse of such a URI would ask libhdfs for the namenode "hdfs://", not for the
    default; host "default" (port 0) is libhdfs's name for ``fs.defaultFS``. Unlike Hadoop,
    libhdfs opens ``fs.defaultFS`` whatever its scheme; Spark, which refuses ``hdfs:/path`` when
    it is not ``hdfs://...``, fails on such a checkpoint before the store is asked.
    """
    import pyarrow.fs

    try:
        return pyarrow.fs.HadoopFileSystem("default", 0)
    except (OSError, pyarrow.ArrowException) as error:
        reason = (str(error).strip() or repr(error)).splitlines()[0]
        raise ConfigError(
            f"location {location!r} is the HDFS path {path} on the default filesystem "
            f"(fs.defaultFS), as Hadoop reads an hdfs: URI without a namenode, but it cannot "
            f"be opened: {reason}. Name the namenode in the location, e.g. "
            f"hdfs://namenode:8020{path}, or give this process the Hadoop configuration that "
            "sets fs.defaultFS (HADOOP_CONF_DIR); either way HDFS needs libhdfs and a JVM "
            "(JAVA_HOME, HADOOP_HOME or ARROW_LIBHDFS_DIR, CLASSPATH=$(hadoop classpath --glob))"
        ) from error


def _local_path(fs: pyarrow.fs.FileSystem, path: str) -> str | None:
    """The OS path of ``path`` if ``fs`` is the local disk (pyarrow's, a subtree of it, or
    fsspec's behind ``PyFileSystem``), else None."""
    if fs.type_name == "local":
        return os.path.abspath(path)
    if fs.type_name == "subtree":
        base = _local_path(fs.base_fs, fs.base_path)
        return None if base is None else os.path.join(base, path.lstrip("/"))
    protocol = getattr(getattr(getattr(fs, "handler", None), "fs", None), "protocol", ())
    protocols = (protocol,) if isinstance(protocol, str) else protocol
    return os.path.abspath(path) if "file" in protocols else None


class _LocalFileSystem:
    """POSIX files with fsync: the only way a rename is durable, not just atomic."""

    def __init__(self, root: str) -> None:
        # Normalized: _settle compares it with the directory of each path the store names.
        self._root = os.path.normpath(root)
        self._ready = False
        self._settled = False

    def read(self, path: str) -> bytes:
        self._settle(os.path.dirname(path))
        with open(path, "rb") as file:
            return file.read()

    def write_atomic(self, path: str, data: bytes) -> None:
        self._ensure_root()
        directory, name = os.path.split(path)
        temp = os.path.join(directory, f".{name}.tmp-{uuid.uuid4().hex}")
        try:
            with open(temp, "xb") as file:
                file.write(data)
                file.flush()
                os.fsync(file.fileno())
            os.replace(temp, path)
        except BaseException:
            if os.path.exists(temp):
                os.unlink(temp)
            raise
        _fsync_directory(directory)

    def create(self, path: str, data: bytes) -> None:
        """``write_atomic``: one writer per location (Spark's rule), which checked first."""
        self.write_atomic(path, data)

    def exists(self, path: str) -> bool:
        self._settle(os.path.dirname(path))
        return os.path.exists(path)

    def list(self, directory: str) -> list[str]:
        self._settle(directory)
        try:
            return os.listdir(directory)
        except FileNotFoundError:
            return []

    def delete(self, path: str) -> None:
        """Unlink, durably: prune deletes a decision before its confirmation, and only a
        directory fsync in between keeps a power loss from undoing the first alone (an old
        decision back, unconfirmed, that recovery would commit again)."""
        try:
            os.unlink(path)
        except FileNotFoundError:
            return
        _fsync_directory(os.path.dirname(path))

    def _settle(self, directory: str) -> None:
        """Before a handle's first answer from the root, fsync it: a writer that died between
        its rename and its directory fsync leaves a name (a decision, a confirmation) that
        every process sees but a power loss can still undo. Acting on it unsettled (committing
        what the decision names, skipping the recovery of a confirmed one) could commit a
        batch whose decision then vanishes, and Spark would replay it: duplicates."""
        if self._settled or os.path.normpath(directory) != self._root:
            return
        try:
            _fsync_directory(self._root)
        except FileNotFoundError:  # nothing written yet; a writer may create it later
            return
        self._settled = True

    def _ensure_root(self) -> None:
        if self._ready:
            return
        missing = []
        level = self._root
        while not os.path.isdir(level) and os.path.dirname(level) != level:
            missing.append(level)
            level = os.path.dirname(level)
        # A directory's entry lives in its parent: unless the parent of every level is
        # fsynced, a power loss can drop the whole tree with the decisions in it. One level at
        # a time, each made durable before the next is created, so a crash leaves at most the
        # deepest existing level undurable: the next handle finds it as `level` and syncs it.
        _fsync_directory(os.path.dirname(level))
        for directory in reversed(missing):
            with contextlib.suppress(FileExistsError):  # another handle made it meanwhile
                os.mkdir(directory)
            _fsync_directory(os.path.dirname(directory))
        self._ready = True


def _fsync_directory(directory: str) -> None:
    if not hasattr(os, "O_DIRECTORY"):  # Windows cannot open a directory; rename is durable there
        return
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class _ArrowFileSystem:
    """Any ``pyarrow.fs.FileSystem`` (GCS, HDFS, ABFS, S3 when the caller passes one, or fsspec
    behind ``PyFileSystem``)."""

    def __init__(self, fs: pyarrow.fs.FileSystem, root: str) -> None:
        self._fs = fs
        self._root = root
        self._ready = False

    def read(self, path: str) -> bytes:
        with self._fs.open_input_stream(path) as stream:
            return bytes(stream.read())

    def write_atomic(self, path: str, data: bytes) -> None:
        if not self._ready:
            self._fs.create_dir(self._root, recursive=True)
            self._ready = True
        directory, _, name = path.rpartition("/")
        temp = f"{directory}/.{name}.tmp-{uuid.uuid4().hex}"
        # No fsync here, and none is needed: local disks never get here (open_filesystem gives
        # them _LocalFileSystem). Object stores (S3, GCS, ABFS) publish an object whole when its
        # upload completes and move it by an atomic server-side copy, so there is no client
        # cache to flush; an HDFS close returns once the datanode pipeline has every block.
        try:
            with self._fs.open_output_stream(temp) as stream:
                stream.write(data)
            self._fs.move(temp, path)
        except BaseException:
            self.delete(temp)
            raise

    def create(self, path: str, data: bytes) -> None:
        """``write_atomic``: one writer per location (Spark's rule), which checked first."""
        self.write_atomic(path, data)

    def exists(self, path: str) -> bool:
        import pyarrow.fs

        return self._fs.get_file_info(path).type != pyarrow.fs.FileType.NotFound

    def list(self, directory: str) -> list[str]:
        import pyarrow.fs

        selector = pyarrow.fs.FileSelector(directory, allow_not_found=True)
        return [info.base_name for info in self._fs.get_file_info(selector)]

    def delete(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._fs.delete_file(path)
