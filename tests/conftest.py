"""The hypothesis profiles of the property tests (tests/checkpoint, tests/sink, tests/source).

Chosen with ``HYPOTHESIS_PROFILE`` (default "ci" when ``CI`` is set, as in ``.ci/run``, else
"dev"):

* ``dev``: a quick local run (150 schedules per machine, a few seconds);
* ``ci``: 2,000 random schedules of up to 20 steps per machine (the shipped-sink machine sets
  its own count and steps), ~65 s for the reference coordinator's on a busy 2-core machine.
  Every CI run draws new schedules, so the search adds up across runs; 30-step schedules cost
  ~40% more, and seeded bugs (aborting a decided batch, deciding out of id order, notifying
  before the decision) are still found at 20;
* ``deep``: 20,000, the long search (``make properties``, not in ``make test``: ~15 min).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile("dev", max_examples=150, deadline=None)
for name, examples in (("ci", 2000), ("deep", 20_000)):
    settings.register_profile(
        name,
        max_examples=examples,
        deadline=None,
        database=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow],
    )
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))
