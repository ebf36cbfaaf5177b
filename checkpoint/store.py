"""Durable snapshot store: the commit decisions, one write-once file per checkpoint.

Layout under ``location`` (Spark sink: ``<checkpointLocation>/kafka-eos/<sink>``)::

    <id>.snapshot.json     the decision (a Snapshot); its existence means "checkpoint complete"
    <id>.confirmed.json    every transaction of <id> committed, or an operator accepted the
                           loss of the ones that never will (a Confirmation)
    .<name>.tmp-<uuid>     a write in progress or left by a crash; readers skip it

Why it is safe:

1. Atomic publish. Bytes go to a hidden temporary name, are flushed (``fsync`` on a local disk),
   then moved to the final name; on a local disk the directory is fsynced too so the rename
   survives power loss. Local and HDFS renames are atomic. S3 has neither rename nor fsync: each
   file is one whole-object put (checkpoint/_s3.py), which S3 publishes whole or not at all. On
   other object stores (GCS, ABFS) a move is a server-side copy, atomic per object, plus a
   delete: the final name never holds a partial object, and a crash between copy and delete
   leaves only a hidden temporary that :meth:`SnapshotStore.prune` removes.
2. Write-once names. A decision is never overwritten, so no reader can see it change and
   eventual consistency of overwrites (older object stores) does not matter. On S3 the put of a
   decision is conditional (``If-None-Match: *``): of two writers of decision N, S3 stores one
   and refuses the other, which :meth:`SnapshotStore.write` then reports as already decided.
3. Checksum. Each file embeds the sha256 of its canonical JSON; a truncated or damaged file is
   rejected with :class:`CorruptSnapshotError` naming it, never silently skipped, because skipping
   a decision could lose or duplicate a batch.

Every call goes to the filesystem; nothing is cached, so the Spark driver's short-lived Python
workers and the executors may each open their own store on the same location. There must be a
single writer (Spark allows one active run per checkpoint location).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from typing import TYPE_CHECKING, Any

from checkpoint._filesystem import canonical_location as canonical_location  # re-exported
from checkpoint._filesystem import open_filesystem
from checkpoint.errors import (
    ConfigError,
    CorruptSnapshotError,
    FormatError,
    ProtocolError,
    UnsupportedFormatVersion,
)
from checkpoint.model import AcceptedLoss, CheckpointId, Confirmation, Snapshot, as_checkpoint_id

if TYPE_CHECKING:
    import pyarrow.fs

_NAME = re.compile(r"^(\d+)\.(snapshot|confirmed)\.json$")
_TEMP = re.compile(r"^\.(\d+)\.(snapshot|confirmed)\.json\.tmp-[0-9a-f]+$")


def read_location(location: str | os.PathLike[str]) -> bytes | None:
    """The bytes of the file at ``location``, resolved as a store there would be; None if
    there is none. Lets an engine fingerprint its own log entries (Spark's ``offsets/N``)."""
    fs, path = open_filesystem(os.fspath(location), None)
    try:
        return fs.read(path)
    except FileNotFoundError:
        return None


class SnapshotStore:
    """Decisions and confirmations of one pipeline, on a local path or a filesystem URI.

    ``location`` is a local path, ``file://...``, ``s3://`` (``s3a://``; through boto3), or any
    URI that ``pyarrow.fs`` (``gs://``, ``hdfs://``, ``abfs://``) or fsspec (``memory://``, ...)
    understands. Pass
    ``filesystem`` to use a configured ``pyarrow.fs.FileSystem`` with ``location`` as its path.
    ``retain`` is how many newest decisions :meth:`prune` keeps.
    """

    def __init__(
        self,
        location: str | os.PathLike[str],
        *,
        retain: int = 10,
        filesystem: pyarrow.fs.FileSystem | None = None,
    ) -> None:
        if not isinstance(retain, int) or retain < 1:
            raise ConfigError(f"retain must be an int >= 1 (newest decisions kept), got {retain!r}")
        self.location = os.fspath(location)
        self.retain = retain
        self._fs, self._root = open_filesystem(self.location, filesystem)

    def __repr__(self) -> str:
        return f"SnapshotStore({self.location!r}, retain={self.retain})"

    # -- decisions -------------------------------------------------------------------------

    def write(self, snapshot: Snapshot) -> None:
        """Publish a decision. Write-once: rewriting the same content is a no-op, other fails,
        also when another writer got there between the check and the write (S3's conditional
        put refuses it), or when a retried put finds the one whose answer was lost."""
        if self._check_existing(snapshot):
            return
        try:
            self._fs.create(self._path(snapshot.checkpoint_id, "snapshot"), _encode(snapshot))
        except FileExistsError:
            if not self._check_existing(snapshot):
                raise  # created, then gone (pruned?) before it could be read: report it

    def _check_existing(self, snapshot: Snapshot) -> bool:
        """Whether ``snapshot`` is the decision already there; ProtocolError if another is."""
        existing = self.get(snapshot.checkpoint_id)
        if existing is not None and existing != snapshot:
            raise ProtocolError(
                f"checkpoint {snapshot.checkpoint_id} is already decided in "
                f"{self._path(snapshot.checkpoint_id, 'snapshot')} with other content; "
                "a decision is final and is never rewritten"
            )
        return existing is not None

    def get(self, checkpoint_id: int) -> Snapshot | None:
        """The decision of ``checkpoint_id``, or None if it was never decided (or was pruned)."""
        return self._read(Snapshot, as_checkpoint_id(checkpoint_id))

    def contains(self, checkpoint_id: int) -> bool:
        """Whether ``checkpoint_id`` is decided; cheap (no read), asked before deciding it."""
        return self._fs.exists(self._path(as_checkpoint_id(checkpoint_id), "snapshot"))

    def checkpoint_ids(self) -> list[CheckpointId]:
        """Ids of decided (completed) checkpoints still retained, ascending."""
        return sorted(i for i, kind in self._scan() if kind == "snapshot")

    def latest(self) -> Snapshot | None:
        """The newest decision; raises :class:`CorruptSnapshotError` rather than skip it."""
        ids = self.checkpoint_ids()
        return self.get(ids[-1]) if ids else None

    # -- confirmations ---------------------------------------------------------------------

    def confirm(
        self,
        checkpoint_id: int,
        *,
        confirmed_at_ms: int | None = None,
        accepted_loss: AcceptedLoss | None = None,
    ) -> None:
        """Record that every transaction of a decided checkpoint committed; idempotent.

        With ``accepted_loss``: that the transactions it names never will, and an operator
        accepted it (see :meth:`_check_loss` for when that is refused).
        """
        cid = as_checkpoint_id(checkpoint_id)
        if not self.contains(cid):
            raise ProtocolError(f"cannot confirm checkpoint {cid}: it has no decision in {self}")
        if accepted_loss is not None:
            self._check_loss(cid, accepted_loss)
        elif self.is_confirmed(cid):
            return
        record = Confirmation(cid, confirmed_at_ms, accepted_loss)
        self._fs.write_atomic(self._path(cid, "confirmed"), _encode(record))

    def _check_loss(self, cid: CheckpointId, loss: AcceptedLoss) -> None:
        """A loss is accepted once, for an unconfirmed decision that holds every lost
        transaction as it is: it must never replace a confirmation that says everything
        committed, nor name a transaction that the decision does not hold."""
        if self.is_confirmed(cid):
            raise ProtocolError(
                f"cannot accept a loss in checkpoint {cid}: it is already confirmed in "
                f"{self._path(cid, 'confirmed')}, so recovery no longer commits it"
            )
        decision = self.get(cid)
        held = () if decision is None else decision.committables
        foreign = [c for c in loss.lost if c not in held]
        if foreign:
            raise ProtocolError(
                f"cannot accept the loss of {foreign!r} in checkpoint {cid}: its decision in "
                f"{self._path(cid, 'snapshot')} holds {list(held)!r}"
            )

    def confirmation(self, checkpoint_id: int) -> Confirmation | None:
        """The confirmation of ``checkpoint_id``, with its accepted loss if any; or None."""
        return self._read(Confirmation, as_checkpoint_id(checkpoint_id))

    def is_confirmed(self, checkpoint_id: int) -> bool:
        # A damaged confirmation is reported, not trusted.
        return self.confirmation(checkpoint_id) is not None

    def unconfirmed_ids(self) -> list[CheckpointId]:
        """Decided checkpoints whose commits are not all known to have happened, ascending."""
        entries = self._scan()
        confirmed = {i for i, kind in entries if kind == "confirmed"}
        return sorted(i for i, kind in entries if kind == "snapshot" and i not in confirmed)

    # -- retention -------------------------------------------------------------------------

    def prune(self) -> list[CheckpointId]:
        """Keep the ``retain`` newest decisions; return the ids deleted.

        An unconfirmed decision is never deleted: recovery still needs it to commit again.
        The snapshot goes before its confirmation, so a crash in between leaves an orphan
        confirmation (ignored), never an old decision that looks unconfirmed and whose
        long-reused transactional ids recovery would try to commit.
        """
        names = self._fs.list(self._root)
        entries = _parse(names)
        snapshots = sorted(i for i, kind in entries if kind == "snapshot")
        confirmed = {i for i, kind in entries if kind == "confirmed"}
        deleted = [i for i in snapshots[: -self.retain] if i in confirmed]
        for cid in deleted:
            self._fs.delete(self._path(cid, "snapshot"))
            self._fs.delete(self._path(cid, "confirmed"))
        oldest_kept = min(set(snapshots) - set(deleted), default=None)
        newest_confirmed = max(confirmed & set(snapshots), default=-1)
        for cid in confirmed - set(snapshots):
            if oldest_kept is None or cid < oldest_kept:
                self._fs.delete(self._path(cid, "confirmed"))  # orphan of an earlier crash
        for name in names:
            temp = _TEMP.match(name)
            if temp and int(temp.group(1)) <= newest_confirmed:
                self._fs.delete(f"{self._root}/{name}")  # left by a crashed writer
        return deleted

    # -- internals -------------------------------------------------------------------------

    def _path(self, checkpoint_id: int, kind: str = "snapshot") -> str:
        return f"{self._root}/{checkpoint_id}.{kind}.json"

    def _scan(self) -> list[tuple[CheckpointId, str]]:
        return _parse(self._fs.list(self._root))

    def _read(self, cls: type[Snapshot] | type[Confirmation], cid: CheckpointId) -> Any:
        """The record in ``cid``'s file of ``cls``'s kind, checked against the name; or None."""
        path = self._path(cid, "snapshot" if cls is Snapshot else "confirmed")
        data = self._load(path)
        if data is None:
            return None
        record = _decode(cls, data, path)
        if record.checkpoint_id != cid:
            # A renamed or copied file: trusting it would take another checkpoint's decision
            # (its offsets and transactions) for this one and commit or skip the wrong batch.
            detail = (
                f"it holds checkpoint {record.checkpoint_id} but its name says checkpoint {cid} "
                "(renamed, or copied from elsewhere)"
            )
            raise CorruptSnapshotError(path, detail)
        return record

    def _load(self, path: str) -> dict[str, Any] | None:
        try:
            raw = self._fs.read(path)
        except FileNotFoundError:
            return None
        try:
            data = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CorruptSnapshotError(path, f"not valid JSON ({exc}), {len(raw)} bytes") from exc
        if not isinstance(data, dict) or not isinstance(data.get("sha256"), str):
            raise CorruptSnapshotError(path, 'no "sha256" field')
        stored = data.pop("sha256")
        computed = _checksum(data)
        if stored != computed:
            detail = f"sha256 mismatch (stored {stored}, computed {computed})"
            raise CorruptSnapshotError(path, detail)
        return data


def _parse(names: list[str]) -> list[tuple[CheckpointId, str]]:
    """(id, kind) of every published file; temporaries and foreign files are ignored."""
    matches = (_NAME.match(name) for name in names)
    return [(CheckpointId(int(m.group(1))), m.group(2)) for m in matches if m]


def _checksum(data: dict[str, Any]) -> str:
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _encode(record: Snapshot | Confirmation) -> bytes:
    data = record.to_dict()
    data["sha256"] = _checksum(data)
    return (json.dumps(data, sort_keys=True, indent=1, ensure_ascii=False) + "\n").encode("utf-8")


def _decode(cls: type[Any], data: dict[str, Any], path: str) -> Any:
    try:
        return cls.from_dict(data)
    except UnsupportedFormatVersion as exc:
        raise UnsupportedFormatVersion(exc.kind, exc.seen, exc.supported, path) from exc
    except FormatError as exc:
        raise CorruptSnapshotError(path, str(exc)) from exc
