"""Fixtures of the checkpoint tests (the hypothesis profiles are in tests/conftest.py)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from checkpoint.store import SnapshotStore
from checkpoint.testing import InMemoryBroker, ManualClock


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def broker() -> InMemoryBroker:
    return InMemoryBroker()


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    return tmp_path / "kafka-eos" / "sink"


@pytest.fixture
def store(store_dir: Path) -> SnapshotStore:
    return SnapshotStore(store_dir, retain=3)


@pytest.fixture
def memory_location() -> Iterator[str]:
    """A fresh ``memory://`` root, removed afterwards (fsspec's memory fs is process-wide)."""
    import fsspec

    location = f"memory://kafka-eos-tests/{uuid.uuid4().hex}"
    yield location
    fs = fsspec.filesystem("memory")
    path = location.removeprefix("memory:/")
    if fs.exists(path):
        fs.rm(path, recursive=True)
