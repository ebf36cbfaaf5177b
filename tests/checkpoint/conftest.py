"""Fixtures of the checkpoint tests, and the hypothesis profiles.

Profiles, chosen with ``HYPOTHESIS_PROFILE`` (default "ci" when ``CI`` is set, as in
``.ci/run``, else "dev"):

* ``dev``: a quick local run of the property tests (150 schedules per machine, ~2 s);
* ``ci``: 5,000 random schedules of up to 20 steps per machine, ~31 s each on a busy 2-core
  machine (~66 s for the checkpoint suite). 30-step schedules cost ~40% more and would not fit
  in 90 s; seeded bugs (aborting a decided batch, deciding out of id order, notifying before
  the decision) are still found at 20.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from checkpoint.store import SnapshotStore
from checkpoint.testing import InMemoryBroker, ManualClock

settings.register_profile("dev", max_examples=150, deadline=None)
settings.register_profile(
    "ci",
    max_examples=5000,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


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
