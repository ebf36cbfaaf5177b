"""Value objects of the protocol: checkpoint ids, committables, snapshots, confirmations.

They are small, frozen and picklable because Spark ships committables from tasks to the driver
inside commit messages. Each has a versioned dict form (JSON-ready): ``"version"`` is always
written and always checked on read, so a newer file is rejected instead of misread, and fields
use string codes, never enum positions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, NewType

from checkpoint.errors import FormatError, UnsupportedFormatVersion

CheckpointId = NewType("CheckpointId", int)
"""Monotonic checkpoint number; in Spark the micro-batch id (``batchId``), starting at 0."""

TopicPartition = tuple[str, int]

COMMITTABLE_VERSION = 2  # 2 adds "start_time_ms"; version 1 reads with -1 (unknown)
SNAPSHOT_VERSION = 2  # 2 adds "plan"; version 1 files read with plan None
# 2 adds "accepted_loss"; 3 its "undetermined" transactions. Older files read without them.
CONFIRMATION_VERSION = 3


def as_checkpoint_id(value: object) -> CheckpointId:
    """Validate a checkpoint id: a non-negative int (bool is rejected, it is an int in Python)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise FormatError(f"checkpoint id must be an int >= 0, got {value!r}")
    return CheckpointId(value)


class SourceOffset(NamedTuple):
    """Next offset to read from one source partition once the checkpoint is restored."""

    topic: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class Committable:
    """A pre-committed transaction, as a task hands it to the committer.

    It is self-sufficient: any process (the driver, or a new one after a crash) can commit or
    abort the transaction from these fields alone, without the producer that wrote it.
    A task that wrote nothing opened no transaction: :meth:`nothing_written` names it, with
    ``producer_id`` and ``epoch`` -1, ``record_count`` 0 and no partitions, and
    :attr:`wrote_nothing` tells it apart. Any other committable names a transaction, with
    ``producer_id`` and ``epoch`` >= 0; a mix of the two is refused.

    ``start_time_ms`` is when the transaction began by its coordinator's clock, -1 if unknown
    (a committable of an earlier release, or nothing written). It tells this transaction
    from a later one of the same producer epoch, so a coordinator's answer about the id can
    be taken as evidence about this transaction, or not.
    """

    transactional_id: str
    producer_id: int
    epoch: int
    record_count: int
    partitions: tuple[TopicPartition, ...] = ()
    start_time_ms: int = -1

    def __post_init__(self) -> None:
        if not isinstance(self.transactional_id, str) or not self.transactional_id:
            raise FormatError(f"transactional_id must be a non-empty str: {self!r}")
        for name in ("producer_id", "epoch", "record_count", "start_time_ms"):
            value = getattr(self, name)
            low = 0 if name == "record_count" else -1
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise FormatError(f"{name} must be an int >= {low}, got {value!r}")
        try:
            parts = tuple(sorted({(str(t), int(p)) for t, p in self.partitions}))
        except (TypeError, ValueError) as exc:
            raise FormatError(f"partitions must be (topic, partition) pairs: {exc}") from exc
        object.__setattr__(self, "partitions", parts)
        if (self.producer_id == -1) != (self.epoch == -1):
            raise FormatError(
                "producer_id and epoch are both -1 (a task that wrote nothing) or both >= 0 "
                f"(a transaction): {self!r}"
            )
        if self.producer_id == -1 and (self.record_count or parts or self.start_time_ms != -1):
            raise FormatError(
                "a committable that wrote nothing (producer_id and epoch -1) has no records, "
                f"no partitions and no start time: {self!r}"
            )

    @classmethod
    def nothing_written(cls, transactional_id: str) -> Committable:
        """What a task with no input hands over: there is no transaction to commit."""
        return cls(transactional_id, -1, -1, 0)

    @property
    def wrote_nothing(self) -> bool:
        return self.producer_id < 0

    @property
    def key(self) -> tuple[str, int, int]:
        """Identity of the transaction: two committables with the same key name the same one."""
        return (self.transactional_id, self.producer_id, self.epoch)

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": COMMITTABLE_VERSION,
            "transactional_id": self.transactional_id,
            "producer_id": self.producer_id,
            "epoch": self.epoch,
            "record_count": self.record_count,
            "partitions": [[topic, partition] for topic, partition in self.partitions],
            "start_time_ms": self.start_time_ms,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Committable:
        _check_version(data, "committable", COMMITTABLE_VERSION, readable=(1,))
        return cls(
            transactional_id=_field(data, "transactional_id", "committable"),
            producer_id=_field(data, "producer_id", "committable"),
            epoch=_field(data, "epoch", "committable"),
            record_count=_field(data, "record_count", "committable"),
            partitions=tuple(data.get("partitions", ())),
            start_time_ms=data.get("start_time_ms", -1),
        )


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A completed checkpoint: the durable commit decision.

    Its existence in the store is the decision: all ``committables`` must become visible, and
    the source resumes from ``source_offsets``. In Spark the offsets live in Spark's own
    ``offsets/N`` log, so the sink leaves them empty and records ``plan``, a fingerprint of
    that log entry: a batch id reused for another plan (``offsets/N`` deleted and planned
    anew) must not pass for the batch this decision committed.
    """

    checkpoint_id: CheckpointId
    pipeline_id: str
    committables: tuple[Committable, ...] = ()
    source_offsets: tuple[SourceOffset, ...] = ()
    triggered_at_ms: int | None = None
    decided_at_ms: int | None = None
    plan: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "checkpoint_id", as_checkpoint_id(self.checkpoint_id))
        if not isinstance(self.pipeline_id, str) or not self.pipeline_id:
            raise FormatError(f"pipeline_id must be a non-empty str, got {self.pipeline_id!r}")
        offsets = tuple(sorted(SourceOffset(*o) for o in self.source_offsets))
        object.__setattr__(self, "source_offsets", offsets)
        committables = tuple(self.committables)
        if not all(isinstance(c, Committable) for c in committables):
            raise FormatError(f"committables must be Committable objects: {committables!r}")
        object.__setattr__(self, "committables", committables)

    @staticmethod
    def offsets_from(
        offsets: Mapping[TopicPartition, int] | Iterable[SourceOffset],
    ) -> tuple[SourceOffset, ...]:
        """Accept ``{(topic, partition): offset}`` or ``SourceOffset`` items."""
        if isinstance(offsets, Mapping):
            return tuple(SourceOffset(t, p, o) for (t, p), o in offsets.items())
        return tuple(SourceOffset(*o) for o in offsets)

    def offsets(self) -> dict[TopicPartition, int]:
        return {(o.topic, o.partition): o.offset for o in self.source_offsets}

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": SNAPSHOT_VERSION,
            "kind": "snapshot",
            "checkpoint_id": self.checkpoint_id,
            "pipeline_id": self.pipeline_id,
            "triggered_at_ms": self.triggered_at_ms,
            "decided_at_ms": self.decided_at_ms,
            "plan": self.plan,
            "source_offsets": [
                {"topic": o.topic, "partition": o.partition, "offset": o.offset}
                for o in self.source_offsets
            ],
            "committables": [c.to_dict() for c in self.committables],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Snapshot:
        _check_version(data, "snapshot", SNAPSHOT_VERSION, readable=(1,))
        try:
            offsets = tuple(
                SourceOffset(o["topic"], o["partition"], o["offset"])
                for o in data.get("source_offsets", ())
            )
        except (KeyError, TypeError) as exc:
            raise FormatError(f"snapshot has a malformed source offset: {exc!r}") from exc
        return cls(
            checkpoint_id=as_checkpoint_id(_field(data, "checkpoint_id", "snapshot")),
            pipeline_id=_field(data, "pipeline_id", "snapshot"),
            committables=tuple(Committable.from_dict(c) for c in data.get("committables", ())),
            source_offsets=offsets,
            triggered_at_ms=data.get("triggered_at_ms"),
            decided_at_ms=data.get("decided_at_ms"),
            plan=data.get("plan"),
        )


@dataclass(frozen=True, slots=True)
class AcceptedLoss:
    """An operator's acceptance that transactions of a decided checkpoint will never be
    confirmed as committed, so that recovery stops failing on them at every restart.

    ``lost``: the broker aborted them before their commit (their ``transaction.timeout.ms``
    expired). ``undetermined``: the broker no longer shows whether they committed first; their
    records may well be visible. Recorded in the checkpoint's confirmation, with who accepted
    it and why, so that the loss is on record and not silent
    (``kafka-eos txn resolve --accept-loss``).
    """

    lost: tuple[Committable, ...]
    reason: str
    accepted_by: str
    undetermined: tuple[Committable, ...] = ()

    def __post_init__(self) -> None:
        for name in ("lost", "undetermined"):
            value = getattr(self, name)
            if not isinstance(value, tuple | list) or not all(
                isinstance(c, Committable) for c in value
            ):
                raise FormatError(f"{name} of an accepted loss must be Committables: {value!r}")
            object.__setattr__(self, name, tuple(value))
        if not self.lost and not self.undetermined:
            raise FormatError(
                "an accepted loss names one Committable or more, lost or undetermined"
            )
        for name in ("reason", "accepted_by"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise FormatError(f"{name} of an accepted loss must be a non-empty str: {value!r}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "lost": [c.to_dict() for c in self.lost],
            "undetermined": [c.to_dict() for c in self.undetermined],
            "reason": self.reason,
            "accepted_by": self.accepted_by,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AcceptedLoss:
        if not isinstance(data, Mapping):
            raise FormatError(f"accepted_loss must be a JSON object, got {type(data).__name__}")
        named: dict[str, tuple[Committable, ...]] = {}
        for name in ("lost", "undetermined"):
            value = (
                data.get(name, [])
                if name == "undetermined"
                else _field(data, name, "accepted loss")
            )
            if not isinstance(value, list):
                raise FormatError(
                    f'accepted loss "{name}" must be a list, got {type(value).__name__}'
                )
            named[name] = tuple(Committable.from_dict(c) for c in value)
        return cls(
            lost=named["lost"],
            reason=_field(data, "reason", "accepted loss"),
            accepted_by=_field(data, "accepted_by", "accepted loss"),
            undetermined=named["undetermined"],
        )


@dataclass(frozen=True, slots=True)
class Confirmation:
    """Record that every committable of a decided checkpoint committed, or, with
    ``accepted_loss``, that the ones it names never will and an operator accepted that.

    Without it a decided checkpoint is "decided but unconfirmed" and ``recover()`` commits its
    transactions again; with it recovery leaves the (possibly long reused) ids alone. Version
    2 adds ``accepted_loss``, version 3 its undetermined transactions; older files read
    without them.
    """

    checkpoint_id: CheckpointId
    confirmed_at_ms: int | None = None
    accepted_loss: AcceptedLoss | None = None

    def __post_init__(self) -> None:
        loss = self.accepted_loss
        if loss is not None and not isinstance(loss, AcceptedLoss):
            raise FormatError(f"accepted_loss must be an AcceptedLoss, got {loss!r}")
        if loss is not None and self.confirmed_at_ms is None:
            # The record of an accepted loss says when, as well as who and why.
            raise FormatError("a confirmation with an accepted loss needs its confirmed_at_ms")

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": CONFIRMATION_VERSION,
            "kind": "confirmation",
            "checkpoint_id": self.checkpoint_id,
            "confirmed_at_ms": self.confirmed_at_ms,
            "accepted_loss": None if self.accepted_loss is None else self.accepted_loss.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Confirmation:
        _check_version(data, "confirmation", CONFIRMATION_VERSION, readable=(1, 2))
        loss = data.get("accepted_loss")
        return cls(
            checkpoint_id=as_checkpoint_id(_field(data, "checkpoint_id", "confirmation")),
            confirmed_at_ms=data.get("confirmed_at_ms"),
            accepted_loss=None if loss is None else AcceptedLoss.from_dict(loss),
        )


def _check_version(
    data: Mapping[str, Any], kind: str, supported: int, *, readable: tuple[int, ...] = ()
) -> None:
    """``supported`` is the version written; ``readable`` lists older ones still read, with
    defaults for the fields they lack."""
    if not isinstance(data, Mapping):
        raise FormatError(f"{kind} must be a JSON object, got {type(data).__name__}")
    seen = data.get("version")
    versions = (*readable, supported)
    if seen not in versions or isinstance(seen, bool):
        raise UnsupportedFormatVersion(kind, seen, versions)
    declared = data.get("kind", kind)
    if declared != kind:
        raise FormatError(f'expected a {kind}, got "kind": {declared!r}')


def _field(data: Mapping[str, Any], name: str, kind: str) -> Any:
    try:
        return data[name]
    except KeyError:
        raise FormatError(f'{kind} has no "{name}" field; keys seen: {sorted(data)}') from None
