"""The hypothesis profiles of the property tests (tests/checkpoint, tests/sink).

Chosen with ``HYPOTHESIS_PROFILE`` (default "ci" when ``CI`` is set, as in ``.ci/run``, else
"dev"):

* ``dev``: a quick local run (150 schedules per machine, a few seconds);
* ``ci``: 5,000 random schedules of up to 20 steps per machine (the shipped-sink machine sets
  its own count and steps), ~31 s each on a busy 2-core machine. 30-step schedules cost ~40%
  more; seeded bugs (aborting a decided batch, deciding out of id order, notifying before the
  decision) are still found at 20.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

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
