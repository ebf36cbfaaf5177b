"""The chaos harness's pure parts: its seeded plan and its verdict, without a broker."""

from __future__ import annotations

import pytest

from integration_tests.chaos.checker import Record, judge
from integration_tests.chaos.job import WINDOW_MS
from integration_tests.chaos.plan import TARGETS, FaultKind, plan

T0 = 1_000 * WINDOW_MS
# Records 0..2999 in three closed windows, and a fourth window still open (3001 is the newest).
INPUTS = {n: f"k{n % 3}" for n in range(3_002)}


def output_of(inputs: dict[int, str]) -> list[Record]:
    """What an exactly-once run writes: every result once, every closed window's aggregate once
    (partition 0 for every key: the verdict compares readers per partition)."""
    records: list[Record] = [(0, key, f"r:{n}") for n, key in inputs.items()]
    windows: dict[tuple[str, int], tuple[int, int]] = {}
    for n, key in inputs.items():
        window = (key, (T0 + n) // WINDOW_MS * WINDOW_MS)
        count, total = windows.get(window, (0, 0))
        windows[window] = (count + 1, total + n)
    newest = T0 + max(inputs)
    for (key, start), (count, total) in windows.items():
        if start + WINDOW_MS < newest:
            records.append((0, key, f"a:{start}:{count}:{total}"))
    return records


def verdict_of(committed: list[Record], java: list[Record] | None = None, aborted: int = 5):
    java = committed if java is None else java
    return judge(INPUTS, T0, committed, java, len(committed) + aborted, [])


def test_an_exactly_once_output_passes() -> None:
    verdict = verdict_of(output_of(INPUTS))
    assert verdict.failures == []
    assert (verdict.results, verdict.aggregates) == (3_002, 9)


def test_a_duplicated_result_and_a_duplicated_aggregate_are_counted() -> None:
    output = output_of(INPUTS)
    aggregate = next(r for r in output if r[2].startswith("a:"))
    verdict = verdict_of([*output, output[7], aggregate])
    assert verdict.duplicates == 2
    assert verdict.failures == ["2 duplicated and 0 lost"]


def test_a_lost_result_and_a_lost_closed_window_are_counted() -> None:
    output = output_of(INPUTS)
    aggregate = next(r for r in output if r[2].startswith("a:"))
    verdict = verdict_of([r for r in output if r not in (output[0], aggregate)])
    assert verdict.losses == 2


def test_an_aggregate_that_differs_from_its_input_is_wrong() -> None:
    output = output_of(INPUTS)
    key, start, count, total = next(
        (r[1], *r[2].split(":")[1:]) for r in output if r[2].startswith("a:")
    )
    wrong = (0, key, f"a:{start}:{int(count) + 1}:{total}")
    verdict = verdict_of([r for r in output if r[2] != f"a:{start}:{count}:{total}"] + [wrong])
    assert len(verdict.wrong) == 1


def test_readers_that_disagree_fail_the_run() -> None:
    output = output_of(INPUTS)
    assert verdict_of(output, java=output[1:]).java_disagrees


def test_a_run_without_aborted_records_proves_nothing_about_faults_mid_transaction() -> None:
    assert verdict_of(output_of(INPUTS), aborted=0).failures == [
        "no aborted record in the log: no fault landed inside a transaction"
    ]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_plan_is_the_seeds_and_covers_every_target(seed: int) -> None:
    per_kind = dict.fromkeys(FaultKind, 6)
    faults = plan(seed, per_kind, session_timeout_s=4)
    assert faults == plan(seed, per_kind, session_timeout_s=4)
    for kind, targets in TARGETS.items():
        assert sorted({f.target for f in faults if f.kind is kind}) == sorted(targets)
    assert all(f.hold_s > 4 for f in faults if f.kind is FaultKind.BROKER_PAUSE)
    assert faults[-1].kind is not FaultKind.DRIVER


def test_the_watch_counts_batches_by_the_newest_commit_not_the_files(tmp_path) -> None:
    """Spark keeps only the last 100 entries of commits/: past batch 100 a count stands
    still, and a wait for one more batch would wait out its timeout (a long run met that)."""
    from integration_tests.chaos.faults import Watch

    commits = tmp_path / "commits"
    commits.mkdir()
    watch = Watch("unused:9092", "out", tmp_path, "chaos")
    assert watch.spark_committed() == -1
    for n in range(18, 118):  # what Spark left after batch 117
        (commits / str(n)).touch()
    assert watch.spark_committed() == 117
    (commits / "118").touch()
    (commits / "18").unlink()  # Spark's purge of the oldest: still 100 files
    assert watch.spark_committed() == 118  # what batches_pass(1) waited for
