"""Transactional-id naming: ``<prefix>-<owner>-<task partition>-<slot>``, a bounded set.

- **owner**: 8 hex digits of the sha256 of the query's id in its checkpoint (Spark's
  ``metadata``): stable across restarts however the location is spelled, and different for
  two queries. Two queries that share a ``transactionalIdPrefix`` (a redeploy on a new
  checkpoint location while the old query still runs) name different ids, so neither can
  fence the other, and each aborts only its own lingering transactions; another owner's open
  transaction is reported instead.
- **slot**: one of :data:`SLOTS_PER_TASK` ids per task partition. Attempts of one task
  (a retry, a speculative copy, a zombie of a resubmitted stage) must never share an id: the
  later one's ``init_transactions`` would abort the earlier one's transaction, which the driver
  may already have verified or decided (a silent loss). An attempt takes the first slot whose
  id holds no open transaction, starting from a slot of its own
  (:meth:`TransactionalIdNaming.slots`). Zombies are never fenced by a retry: the driver
  fences every open transaction of the owner that its decision does not name.

- **prefix**: the ``transactionalIdPrefix`` option, or, without it,
  :func:`derived_prefix` of the checkpoint location: ``kafka-eos-<name>-<hash>``, stable
  across restarts and unique per location, as the option must be.

Bounded (task partitions x slots), so the coordinators' state stays small and recovery lists
every id by prefix, including ids beyond today's task count after a parallelism change.
Ids of releases before owners (``<prefix>-<task partition>``) name no owner: they may be this
query's from before an upgrade or another query's still on the old release, so they are
never aborted as this query's own, but reported as foreign (:data:`NO_OWNER`).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from checkpoint.store import canonical_location

# Two attempts of a task start at the same slot one time in SLOTS_PER_TASK (see slots()); the
# ids are still bounded (task partitions x slots), for the coordinators' state.
SLOTS_PER_TASK = 32
NO_OWNER = "none (an id of a release before owners)"
_OWNER = re.compile(r"[0-9a-f]{8}")
DERIVED_PREFIX_START = "kafka-eos-"
_NAME_LENGTH = 40
_UNSTABLE = re.compile(r"[^A-Za-z0-9._-]+")
_ANY_OWNED_ID = re.compile(r"(?P<prefix>.+)-(?P<owner>[0-9a-f]{8})-\d+-(?P<slot>\d+)")


def derived_prefix(checkpoint_location: str) -> str:
    """The prefix of a sink without ``transactionalIdPrefix``: the location's last name, for
    the people reading ``kafka-eos txn list`` and ACLs, and a hash of its canonical spelling
    (:func:`checkpoint.store.canonical_location`), which makes it unique per location.

    >>> derived_prefix("s3a://bucket/checkpoints/orders enricher/")
    'kafka-eos-orders_enricher-b5838408564d'
    """
    canonical = canonical_location(checkpoint_location)
    name = _UNSTABLE.sub("_", canonical.rsplit("/", 1)[-1])
    digest = hashlib.sha256(canonical.encode()).hexdigest()[:12]
    return f"{DERIVED_PREFIX_START}{name[:_NAME_LENGTH].strip('._-') or 'query'}-{digest}"


@dataclass(frozen=True)
class OwnedId:
    """What an id of the current release names: the prefix of its sink and the owner."""

    prefix: str
    owner: str

    @classmethod
    def parse(cls, transactional_id: str) -> OwnedId | None:
        """Read from the right (a prefix may hold dashes and digits); None for ids that no
        kafka-eos sink of this release names."""
        match = _ANY_OWNED_ID.fullmatch(transactional_id)
        if match is None or int(match["slot"]) >= SLOTS_PER_TASK:
            return None
        return cls(match["prefix"], match["owner"])


def _owner_part(prefix: str, candidate: str) -> str | None:
    """The owner that ``candidate`` names, :data:`NO_OWNER` for an id of an earlier release,
    or None when a sink with ``prefix`` does not name ``candidate`` at all."""
    match = re.fullmatch(re.escape(prefix) + r"-(?:([0-9a-f]{8})-\d+-(\d+)|\d+)", candidate)
    if match is None:
        return None
    owner, slot = match.groups()
    if owner is None:
        return NO_OWNER
    return owner if int(slot) < SLOTS_PER_TASK else None


def named_for_prefix(prefix: str, candidate: str) -> bool:
    """Whether a sink with ``transactionalIdPrefix`` = ``prefix`` names ``candidate``, for
    whichever query and release; ``prefix-x-1`` is not named for ``prefix``."""
    return _owner_part(prefix, candidate) is not None


def owner_of(query_id: str) -> str:
    """The owner part of the ids of the query with this id (Spark's query id)."""
    return hashlib.sha256(query_id.encode()).hexdigest()[:8]


@dataclass(frozen=True)
class TransactionalIdNaming:
    """The ids one query names; picklable (it travels to the tasks inside the writer)."""

    prefix: str
    owner: str

    def __post_init__(self) -> None:
        if not _OWNER.fullmatch(self.owner):
            raise ValueError(f"owner must be 8 lower-case hex digits, got {self.owner!r}")

    def transactional_id(self, task_partition: int, slot: int) -> str:
        if not 0 <= slot < SLOTS_PER_TASK:
            raise ValueError(f"slot must be in [0, {SLOTS_PER_TASK}), got {slot}")
        return f"{self.prefix}-{self.owner}-{task_partition}-{slot}"

    def slots(self, task_partition: int, attempt_number: int, task_attempt_id: int) -> list[str]:
        """Every id of the task, in the order an attempt tries them, from a slot of its own so
        that concurrent attempts of one task start apart: the attempt number plus Spark's task
        attempt id, which is unique per attempt. The attempt number alone would start a zombie
        of a resubmitted stage and the new stage attempt's first attempt at the same slot (both
        are attempt 0); Spark's stage attempt number would tell them apart, but PySpark's
        TaskContext does not expose it. Two attempts of a task start at the same slot with a
        chance of one in :data:`SLOTS_PER_TASK`; even then, they only meet if both describe
        the slot before either's ``init_transactions`` lands."""
        first = (attempt_number + task_attempt_id) % SLOTS_PER_TASK
        return [
            self.transactional_id(task_partition, (first + step) % SLOTS_PER_TASK)
            for step in range(SLOTS_PER_TASK)
        ]

    def owns(self, candidate: str) -> bool:
        """Whether this query named ``candidate``."""
        return _owner_part(self.prefix, candidate) == self.owner

    def foreign_owner(self, candidate: str) -> str | None:
        """The owner of ``candidate`` (:data:`NO_OWNER` for an earlier release's id) if
        another query may have named it with the same prefix."""
        owner = _owner_part(self.prefix, candidate)
        return owner if owner is not None and owner != self.owner else None
