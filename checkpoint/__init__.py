"""Engine-neutral checkpoint and two-phase-commit core. Imports neither Kafka nor Spark.

Exported here: what the connectors and the command line use. The rest is imported from its
own module: the participant protocols (``checkpoint.participant``), the fault points
(``checkpoint.crashpoints``), the in-process reference coordinator that the property tests
drive (``checkpoint.reference_coordinator``) and the in-memory stand-ins for tests
(``checkpoint.testing``).
"""

from checkpoint.deadline import Clock, Deadline, call_with_retries, retry_pause
from checkpoint.errors import (
    CheckpointCommitFailed,
    ConfigError,
    DeadlineExceeded,
    FormatError,
    KafkaEosError,
    ReusedCheckpointId,
    UnsupportedFormatVersion,
)
from checkpoint.model import AcceptedLoss, CheckpointId, Committable, Confirmation, Snapshot
from checkpoint.store import SnapshotStore, canonical_location, read_location
from checkpoint.two_phase_commit import TwoPhaseCommit

__all__ = [
    "AcceptedLoss",
    "CheckpointCommitFailed",
    "CheckpointId",
    "Clock",
    "Committable",
    "ConfigError",
    "Confirmation",
    "Deadline",
    "DeadlineExceeded",
    "FormatError",
    "KafkaEosError",
    "ReusedCheckpointId",
    "Snapshot",
    "SnapshotStore",
    "TwoPhaseCommit",
    "UnsupportedFormatVersion",
    "call_with_retries",
    "canonical_location",
    "read_location",
    "retry_pause",
]
