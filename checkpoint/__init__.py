"""Engine-neutral checkpoint and two-phase-commit core. Imports neither Kafka nor Spark."""

from checkpoint.deadline import Clock, Deadline, call_with_retries
from checkpoint.errors import (
    AbortReason,
    CheckpointAborted,
    CheckpointCommitFailed,
    CheckpointRejected,
    CheckpointTimeout,
    ConfigError,
    CorruptSnapshotError,
    DeadlineExceeded,
    FormatError,
    KafkaEosError,
    ParticipantFenced,
    ProtocolError,
    StorageError,
    UnsupportedFormatVersion,
)
from checkpoint.model import (
    CheckpointId,
    Committable,
    Confirmation,
    Snapshot,
    SourceOffset,
    TopicPartition,
    as_checkpoint_id,
)
from checkpoint.participant import Committer, Participant
from checkpoint.reference_coordinator import Coordinator, CoordinatorConfig
from checkpoint.store import SnapshotStore
from checkpoint.two_phase_commit import Recovery, TwoPhaseCommit

__all__ = [
    "AbortReason",
    "CheckpointAborted",
    "CheckpointCommitFailed",
    "CheckpointId",
    "CheckpointRejected",
    "CheckpointTimeout",
    "Clock",
    "Committable",
    "Committer",
    "ConfigError",
    "Confirmation",
    "Coordinator",
    "CoordinatorConfig",
    "CorruptSnapshotError",
    "Deadline",
    "DeadlineExceeded",
    "FormatError",
    "KafkaEosError",
    "Participant",
    "ParticipantFenced",
    "ProtocolError",
    "Recovery",
    "Snapshot",
    "SnapshotStore",
    "SourceOffset",
    "StorageError",
    "TopicPartition",
    "TwoPhaseCommit",
    "UnsupportedFormatVersion",
    "as_checkpoint_id",
    "call_with_retries",
]
