"""The property machines' power: how many of N random seeds find each seeded bug.

The unit suite searches each seeded bug from one fixed seed (the ``SEEDS`` of each property test
module), which proves that the bug is found, not how likely a random run is to find it. This
runs each bug's search from seeds 0 to N-1, with the suite's budget, and prints a Markdown table:
the seeds that found the bug (by the invariant it is meant to break), the median number of
schedules they took, and any seed where another invariant (or an error no invariant names)
failed first. Each search's result goes to stderr as it ends. ``make power`` runs it;
it is not part of ``make test``.

    python scripts/seeded_power.py --seeds 8 --jobs 2 [-k words]
"""

from __future__ import annotations

import argparse
import importlib
import logging
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The property test modules with seeded bugs: each has SEEDED_BUGS and hunt_bug(bug, seed).
MODULES = {
    "test_sink_properties": "shipped sink",
    "test_checkpoint_spark_properties": "split form",
    "test_checkpoint_reference_coordinator_properties": "coordinator",
}


def _importable() -> None:
    """The test modules import as pytest imports them; each search sets its own settings."""
    for folder in ("tests/support", "tests/sink", "tests/checkpoint", "."):
        sys.path.insert(0, str(ROOT / folder))
    logging.disable(logging.WARNING)  # the sink's warnings, thousands per search


def _search(module: str, bug: str, at_seed: int) -> tuple[str, str, int, str | None, int]:
    _importable()
    broken, schedules = importlib.import_module(module).hunt_bug(bug, at_seed)
    return module, bug, at_seed, broken, schedules


def _name(broken: str) -> str:
    """An invariant's name as code; an error that no invariant named, as is."""
    return broken if "(no invariant)" in broken else f"`{broken}`"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=8, help="seeds 0 to N-1 (default 8)")
    parser.add_argument("--jobs", type=int, default=2, help="processes (default 2)")
    parser.add_argument("-k", default="", help="only bugs whose name contains this")
    args = parser.parse_args()
    _importable()
    bugs = {m: importlib.import_module(m).SEEDED_BUGS for m in MODULES}
    work = [
        (module, bug, at_seed)
        for module, seeded in bugs.items()
        for bug in sorted(seeded)
        if args.k in bug
        for at_seed in range(args.seeds)
    ]
    started = time.monotonic()
    results = []
    with ProcessPoolExecutor(args.jobs) as pool:
        for done in as_completed([pool.submit(_search, *job) for job in work]):
            results.append(done.result())
            print(*results[-1], sep=" | ", file=sys.stderr, flush=True)  # progress
    print(f"| machine | seeded bug | invariant it breaks | seeds of {args.seeds} that find it | "
          "median schedules | seeds where something else failed first |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- |")
    for module, seeded in bugs.items():
        for bug in sorted(b for b in seeded if args.k in b):
            mine = sorted((r for r in results if r[:2] == (module, bug)), key=lambda r: r[2])
            expected = seeded[bug].invariant
            found = [r for r in mine if r[3] == expected]
            other = [f"{r[2]}: {_name(r[3])}" for r in mine if r[3] not in (None, expected)]
            median = f"{statistics.median(r[4] for r in found):g}" if found else "-"
            seeds = f" ({', '.join(str(r[2]) for r in found)})" if found else ""
            print(f"| {MODULES[module]} | {bug} | `{expected}` | {len(found)}{seeds} | "
                  f"{median} | {'; '.join(other) or '-'} |")  # fmt: skip
    print(f"\n{len(work)} searches in {time.monotonic() - started:.0f} s, {args.jobs} processes")


if __name__ == "__main__":
    main()
