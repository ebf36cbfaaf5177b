"""Fixtures of the ``txn`` and ``verify`` unit tests: a sink's decisions on disk and click's
runner. None needs a broker."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

import click
import pytest
from cli_fakes import NOW_MS
from click.testing import CliRunner, Result

from checkpoint.model import Committable, Snapshot
from checkpoint.store import SnapshotStore


@pytest.fixture
def checkpoint_location(tmp_path: Path) -> Callable[..., str]:
    """``checkpoint_location(decided=[...], confirmed=[...])``: a query's checkpoint whose sink
    store holds decision 0 (confirmed) and decision 1 naming ``decided`` (unconfirmed unless
    ``confirm=True``), written as the sink's coordinator writes them."""

    def make(decided: Iterable[Committable], confirm: bool = False) -> str:
        location = tmp_path / "checkpoint"
        store = SnapshotStore(location / "kafka-eos-sink")
        store.write(Snapshot(0, "orders", (Committable("orders-0", 5, 0, 1),)))
        store.confirm(0)
        store.write(Snapshot(1, "orders", tuple(decided), decided_at_ms=NOW_MS))
        if confirm:
            store.confirm(1)
        return str(location)

    return make


@pytest.fixture
def invoke() -> Callable[..., Result]:
    """Run a click command with the runner; stdout and stderr stay apart."""
    runner = CliRunner()

    def run(command: click.Command, *args: str, input: str | None = None) -> Result:
        return runner.invoke(command, list(args), input=input, catch_exceptions=False)

    return run
