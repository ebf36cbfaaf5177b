"""The chaos harness's short mode, in CI: at least 20 faults, at least 3 of each kind, on a
query whose source and sink are on two clusters. ``make chaos`` runs the long mode.

On Kafka 3.9.2. On 4.x a broker killed as a coordinator writes its markers can make the
coordinator skip the marker of a partition whose leader is offline (KAFKA-20734), a broker bug
that the harness found. A skipped COMMIT marker the sink now writes itself before the next
batch's tasks (``connectors/kafka/sink/marker_repair.py``; seed 20261129 on 4.3.1 passed with
11 written, and the report counts them: ``markers_repaired``). A skipped ABORT marker it writes
after each of its fences, and a task on an aborted id refuses to join a range left open, but
one path to a duplicate remains (an abort the driver never saw, then two takes of the id,
docs/sink.md "Limits"). The same seed on 4.3.1 passed again with both (2026-11-29: 20,120
records, 0 duplicates, 0 losses, 10 COMMIT markers written). The CI run stays on 3.9.2, whose
coordinator waits for the leader and writes both, until that path is closed.
``integration_tests/sink/test_skipped_commit_markers.py`` pins each case on each version.

The seed is the day's unless ``KAFKA_EOS_CHAOS_SEED`` names one; it is printed first, and a
failure replays with ``python -m integration_tests.chaos.run --seed <seed> --two-clusters``.
"""

from __future__ import annotations

import datetime
import json
import os
from collections import Counter
from contextlib import ExitStack
from dataclasses import asdict
from pathlib import Path

import pytest

from integration_tests.chaos.plan import FaultKind
from integration_tests.chaos.run import Chaos, chaos_clusters, faults_by

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

# The release whose brokers write every marker (see the module's docstring).
KAFKA_VERSION = "3.9.2"


def todays_seed() -> int:
    return int(os.environ.get("KAFKA_EOS_CHAOS_SEED") or datetime.date.today().strftime("%Y%m%d"))


def test_a_short_chaos_run_on_two_clusters_loses_nothing_and_doubles_nothing(
    tmp_path: Path,
) -> None:
    seed = todays_seed()
    print(f"chaos seed {seed}: KAFKA_EOS_CHAOS_SEED={seed} replays this schedule")
    with ExitStack() as stack:
        source, sink = chaos_clusters(KAFKA_VERSION, True, stack)
        report = Chaos(seed, "short", source, sink, tmp_path).run()
    print(json.dumps({**asdict(report), "by_kind": faults_by(report)}, indent=2))
    kinds = Counter(str(f["kind"]) for f in report.faults)
    assert len(report.faults) >= 20 and all(kinds[k.value] >= 3 for k in FaultKind), kinds
    assert report.verdict["failures"] == [], report.verdict
