"""The owner registry (connectors/kafka/sink/owners.py): best effort, never in the way.

The group calls go to the model's group offsets (``kafka_model.ModelGroups``); the registry
on a real broker is tested in ``integration_tests/sink/test_shared_prefix.py``."""

from __future__ import annotations

import logging
import uuid
from typing import Any

import kafka.errors as Errors
import pytest
from kafka.structs import OffsetAndMetadata, TopicPartition
from kafka_model import ModelGroups

from connectors.kafka.sink.owners import (
    REFRESH_S,
    OwnerRegistry,
    Registration,
    Unknown,
    registry_group,
)

OWNER, OTHER = "0a1b2c3d", "4e5f6a7b"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


class CountingGroups(ModelGroups):
    def __init__(self) -> None:
        super().__init__({})
        self.commits = 0

    def alter_group_offsets(self, group: str, offsets: Any) -> dict[Any, Any]:
        self.commits += 1
        return super().alter_group_offsets(group, offsets)


def registry(groups: Any, clock: Clock, prefix: str) -> OwnerRegistry:
    return OwnerRegistry(lambda: groups, "model:9092", prefix, wall_clock=clock, monotonic=clock)


def test_a_registered_location_is_found_by_another_query_and_refreshed_hourly() -> None:
    groups, clock, prefix = CountingGroups(), Clock(), f"p{uuid.uuid4().hex[:6]}"
    registry(groups, clock, prefix).register(OWNER, "s3a://b/cp/old", [("out", 2), ("out", 0)])
    found = registry(groups, clock, prefix).lookup([OWNER, OTHER])
    assert found[OWNER] == Registration("s3a://b/cp/old", 1_000_000)
    assert isinstance(found[OTHER], Unknown) and "no registration" in found[OTHER].reason
    [(partition, offset)] = groups._groups[registry_group(prefix, OWNER)].items()
    assert partition == TopicPartition("out", 0) and offset.offset == -1  # "no position"
    registry(groups, clock, prefix).register(OWNER, "s3a://b/cp/old", [("out", 0)])
    assert groups.commits == 1  # once per process and hour, not per batch
    clock.now += REFRESH_S
    registry(groups, clock, prefix).register(OWNER, "s3a://b/cp/old", [("out", 0)])
    assert groups.commits == 2


def test_nothing_is_registered_before_the_query_knows_a_partition() -> None:
    groups, clock = CountingGroups(), Clock()
    registry(groups, clock, f"p{uuid.uuid4().hex[:6]}").register(OWNER, "/cp", [])
    assert groups.commits == 0


class BrokenGroups:
    def alter_group_offsets(self, group: str, offsets: Any) -> dict[Any, Any]:
        return {tp: Errors.GroupAuthorizationFailedError for tp in offsets}

    def list_group_offsets(self, specs: Any) -> dict[str, Any]:
        raise OSError("ssl.ca.location: no such file")


def test_a_failing_registry_never_raises_and_says_what_to_grant(
    caplog: pytest.LogCaptureFixture,
) -> None:
    prefix = f"p{uuid.uuid4().hex[:6]}"
    with caplog.at_level(logging.WARNING, logger="connectors.kafka.sink.owners"):
        registry(BrokenGroups(), Clock(), prefix).register(OWNER, "/cp", [("out", 0)])
    assert "GroupAuthorizationFailedError" in caplog.text
    assert f"a prefixed GROUP ACL on {prefix!r}" in caplog.text
    found = registry(BrokenGroups(), Clock(), prefix).lookup([OTHER])
    assert isinstance(found[OTHER], Unknown) and "no such file" in found[OTHER].reason


def test_a_group_that_holds_no_registration_of_ours_is_no_location() -> None:
    groups, prefix = ModelGroups({}), f"p{uuid.uuid4().hex[:6]}"
    groups.alter_group_offsets(
        registry_group(prefix, OTHER), {TopicPartition("out", 0): OffsetAndMetadata(5, "x", -1)}
    )
    assert isinstance(registry(groups, Clock(), prefix).lookup([OTHER])[OTHER], Unknown)


def _warnings_when_registered_again(
    caplog: pytest.LogCaptureFixture, first: str, second: str
) -> str:
    """What the registry warns of when ``OWNER``, registered at ``first``, registers at
    ``second``."""
    groups, clock, prefix = ModelGroups({}), Clock(), f"p{uuid.uuid4().hex[:6]}"
    registry(groups, clock, prefix).register(OWNER, first, [("out", 0)])
    with caplog.at_level(logging.WARNING, logger="connectors.kafka.sink.owners"):
        registry(groups, clock, prefix).register(OWNER, second, [("out", 0)])
    return caplog.text


def test_the_same_owner_at_another_location_is_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A copied checkpoint: two queries with one owner would share transactional ids."""
    warned = _warnings_when_registered_again(caplog, "hdfs://nn/cp/a", "hdfs://nn/cp/b")
    assert "'hdfs://nn/cp/a'" in warned and "'hdfs://nn/cp/b'" in warned
    assert "stop one" in warned


def test_the_same_location_spelled_another_way_is_not_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A restart on ``file://<path>/`` after ``<path>`` is the same checkpoint: no copy."""
    assert "stop one" not in _warnings_when_registered_again(caplog, "/cp/a", "file:///cp/a/")
