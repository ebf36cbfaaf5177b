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

COMMITTABLE_VERSION = 1
SNAPSHOT_VERSION = 1
CONFIRMATION_VERSION = 1


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
    ``producer_id`` and ``epoch`` may be -1 when no transaction was opened (nothing written).
    """

    transactional_id: str
    producer_id: int
    epoch: int
    record_count: int
    partitions: tuple[TopicPartition, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.transactional_id, str) or not self.transactional_id:
            raise FormatError(f"transactional_id must be a non-empty str: {self!r}")
        for name in ("producer_id", "epoch", "record_count"):
            value = getattr(self, name)
            low = 0 if name == "record_count" else -1
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise FormatError(f"{name} must be an int >= {low}, got {value!r}")
        try:
            parts = tuple(sorted({(str(t), int(p)) for t, p in self.partitions}))
        except (TypeError, ValueError) as exc:
            raise FormatError(f"partitions must be (topic, partition) pairs: {exc}") from exc
        object.__setattr__(self, "partitions", parts)

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
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Committable:
        _check_version(data, "committable", COMMITTABLE_VERSION)
        return cls(
            transactional_id=_field(data, "transactional_id", "committable"),
            producer_id=_field(data, "producer_id", "committable"),
            epoch=_field(data, "epoch", "committable"),
            record_count=_field(data, "record_count", "committable"),
            partitions=tuple(data.get("partitions", ())),
        )


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A completed checkpoint: the durable commit decision.

    Its existence in the store is the decision: all ``committables`` must become visible, and
    the source resumes from ``source_offsets``. In Spark the offsets live in Spark's own
    ``offsets/N`` log, so the sink leaves them empty.
    """

    checkpoint_id: CheckpointId
    pipeline_id: str
    committables: tuple[Committable, ...] = ()
    source_offsets: tuple[SourceOffset, ...] = ()
    triggered_at_ms: int | None = None
    decided_at_ms: int | None = None

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
            "source_offsets": [
                {"topic": o.topic, "partition": o.partition, "offset": o.offset}
                for o in self.source_offsets
            ],
            "committables": [c.to_dict() for c in self.committables],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Snapshot:
        _check_version(data, "snapshot", SNAPSHOT_VERSION)
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
        )


@dataclass(frozen=True, slots=True)
class Confirmation:
    """Record that every committable of a decided checkpoint committed.

    Without it a decided checkpoint is "decided but unconfirmed" and ``recover()`` commits its
    transactions again; with it recovery leaves the (possibly long reused) ids alone.
    """

    checkpoint_id: CheckpointId
    confirmed_at_ms: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": CONFIRMATION_VERSION,
            "kind": "confirmation",
            "checkpoint_id": self.checkpoint_id,
            "confirmed_at_ms": self.confirmed_at_ms,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Confirmation:
        _check_version(data, "confirmation", CONFIRMATION_VERSION)
        return cls(
            checkpoint_id=as_checkpoint_id(_field(data, "checkpoint_id", "confirmation")),
            confirmed_at_ms=data.get("confirmed_at_ms"),
        )


def _check_version(data: Mapping[str, Any], kind: str, supported: int) -> None:
    if not isinstance(data, Mapping):
        raise FormatError(f"{kind} must be a JSON object, got {type(data).__name__}")
    seen = data.get("version")
    if seen != supported or isinstance(seen, bool):
        raise UnsupportedFormatVersion(kind, seen, (supported,))
    declared = data.get("kind", kind)
    if declared != kind:
        raise FormatError(f'expected a {kind}, got "kind": {declared!r}')


def _field(data: Mapping[str, Any], name: str, kind: str) -> Any:
    try:
        return data[name]
    except KeyError:
        raise FormatError(f'{kind} has no "{name}" field; keys seen: {sorted(data)}') from None
