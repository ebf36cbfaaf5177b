"""The chaos harness's short mode, in CI: at least 20 faults, at least 3 of each kind, on a
query whose source and sink are on two clusters. ``make chaos`` runs the long mode.

On Kafka 4.3.1, the default version: there a broker killed as a coordinator writes its markers
can make the coordinator skip a COMMIT marker, a broker bug (KAFKA-20734) that leaves a
committed transaction hanging and every read_committed reader stalled behind it. The harness
found it; the sink now writes such a marker before the next batch's tasks
(``connectors/kafka/sink/marker_repair.py``), and the report counts the markers it wrote
(``markers_repaired``; 11 in seed 20261129's run). Before the repair this run failed on 4.x
within a few runs, so it ran on 3.9.2, whose coordinator waits for the leader instead.
``integration_tests/sink/test_skipped_commit_markers.py`` pins the bug on each version.

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

# The default version, whose coordinators skip markers that the sink then writes (see above).
KAFKA_VERSION = "4.3.1"


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
