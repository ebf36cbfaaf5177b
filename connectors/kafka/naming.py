"""Transactional-id naming: ``<prefix>-<task partition id>``, a bounded, stable set.

Stable, so that a restarted task fences its own zombie (``init_transactions`` on the same id
aborts the zombie's open transaction). Bounded, so that recovery can find every lingering
transaction of a pipeline by prefix, including ids of a higher parallelism before a restart.
"""

from __future__ import annotations

import re


def transactional_id(prefix: str, task_partition: int) -> str:
    return f"{prefix}-{task_partition}"


def is_owned_by(prefix: str, candidate: str) -> bool:
    """Whether ``candidate`` was named by this strategy for ``prefix`` (not ``prefix-x-1``)."""
    return re.fullmatch(re.escape(prefix) + r"-\d+", candidate) is not None
