"""Errors: one root, picklable with their attributes, messages that say how to fix."""

from __future__ import annotations

import inspect
import pickle

import pytest

from checkpoint import errors
from checkpoint.errors import (
    CheckpointAborted,
    CheckpointCommitFailed,
    CheckpointTimeout,
    CorruptSnapshotError,
    KafkaEosError,
    UnsupportedFormatVersion,
)

SAMPLES: list[KafkaEosError] = [
    KafkaEosError("anything"),
    errors.ConfigError("timeout must be > 0 seconds, got -1"),
    errors.FormatError('committable has no "epoch" field'),
    errors.ProtocolError("checkpoint 3 expects ['a'], not 'b'"),
    UnsupportedFormatVersion("snapshot", 3, (1,), "/ckpt/kafka-eos/7.snapshot.json"),
    CorruptSnapshotError("/ckpt/kafka-eos/7.snapshot.json", "sha256 mismatch"),
    errors.CheckpointRejected("min_pause", retry_after=0.5),
    CheckpointAborted(4, "declined", "task 3 failed"),
    CheckpointTimeout(5, 30.0, ("sink-1",)),
    CheckpointCommitFailed(6, ("sink-0-6",), "TimeoutError()"),
    errors.DeadlineExceeded("flush did not finish within 1.0 s"),
    errors.ParticipantFenced("sink-0-6 was fenced"),
    errors.ReusedCheckpointId(7, "sha256:aa", "sha256:bb", "/ckpt/kafka-eos-sink"),
    errors.StorageError("s3a://b/q", "s3://b/q/1.snapshot.json", "PutObject", "HTTP 503", "x"),
]


def test_every_error_derives_from_the_root() -> None:
    classes = [
        c for _, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, Exception)
    ]
    assert all(issubclass(c, KafkaEosError) for c in classes)
    assert {type(e) for e in SAMPLES} == set(classes)


@pytest.mark.parametrize("error", SAMPLES, ids=lambda e: type(e).__name__)
def test_errors_pickle_with_message_and_attributes(error: KafkaEosError) -> None:
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert str(copy) == str(error)
    assert copy.__dict__ == error.__dict__


def test_messages_name_what_was_seen_and_the_fix() -> None:
    version = str(UnsupportedFormatVersion("snapshot", 3, (1,), "/c/7.snapshot.json"))
    assert "version 3" in version and "/c/7.snapshot.json" in version and "Upgrade" in version
    corrupt = str(CorruptSnapshotError("/c/7.snapshot.json", "sha256 mismatch"))
    assert "/c/7.snapshot.json" in corrupt and "Restore" in corrupt
    assert "recover()" in str(CheckpointCommitFailed(6, ("sink-0-6",), "boom"))
    timeout = CheckpointTimeout(5, 30.0, ("sink-1",))
    assert isinstance(timeout, CheckpointAborted) and timeout.reason == "timeout"
    assert "sink-1" in str(timeout)
