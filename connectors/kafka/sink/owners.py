"""The owner registry: where each query of a ``transactionalIdPrefix`` checkpoints.

An owner (:func:`connectors.kafka.sink.naming.owner_of`) is a fingerprint of a query's id: it
tells two queries apart, but cannot be turned back into the other query's checkpoint
location, which is what an operator needs to find that query and stop it. So each sink
records its location under its owner in the one place two queries of a prefix share, the
cluster: the committed-offset metadata of an empty consumer group,
``<prefix>-<owner>.kafka-eos-checkpoint``. The offset is -1, "no position", so lag monitors
show no lag for it; the metadata is a small JSON document (:class:`Registration`).

The registry is an aid to the operator, never part of the protocol: a registration that
fails (an ACL, a location longer than ``offset.metadata.max.bytes``) is logged, and a
conflict then names the other query's owner and transactional ids with the reason its
location is unknown. It needs READ on the group and on the output topic to register, and
DESCRIBE on both to look up. An empty group's offsets expire after
``offsets.retention.minutes`` (7 days by default), so the driver registers again every hour.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

import kafka.errors as Errors
from kafka.admin import KafkaAdminClient
from kafka.structs import OffsetAndMetadata, TopicPartition

from checkpoint.deadline import Deadline, call_with_retries
from checkpoint.store import canonical_location
from connectors.kafka.sink.naming import OwnedId

_log = logging.getLogger(__name__)
GROUP_SUFFIX = ".kafka-eos-checkpoint"
REFRESH_S = 3600.0
_TIMEOUT_S = 10.0
T = TypeVar("T")
_NO_POSITION = -1
_registered: dict[tuple[str, str, str], float] = {}  # (cluster, group, location) -> monotonic


def registry_group(prefix: str, owner: str) -> str:
    """The group whose offset metadata holds the location of ``owner``'s query; it starts
    with the prefix, so a prefixed ACL on the prefix covers it."""
    return f"{prefix}-{owner}{GROUP_SUFFIX}"


@dataclass(frozen=True)
class Registration:
    """Where a query checkpoints, and when its driver last said so."""

    location: str
    registered_ms: int

    def to_metadata(self) -> str:
        return json.dumps({"version": 1, "location": self.location, "at": self.registered_ms})

    @classmethod
    def from_metadata(cls, metadata: str | None) -> Registration | None:
        try:
            doc = json.loads(metadata or "")
            return cls(str(doc["location"]), int(doc["at"]))
        except (ValueError, KeyError, TypeError):
            return None  # not ours (a group someone else named so), or damaged

    def describe(self, now_ms: int) -> str:
        minutes = max(0, now_ms - self.registered_ms) // 60_000
        return f"checkpoint {self.location!r}, registered {minutes} min ago"


@dataclass(frozen=True)
class Unknown:
    """Why a query's location is unknown."""

    reason: str

    def describe(self, now_ms: int) -> str:
        return f"checkpoint location unknown: {self.reason}"


Entry = Registration | Unknown


class OwnerRegistry:
    """Registers this query's location and looks up other owners' (best effort)."""

    def __init__(
        self,
        admin: Callable[[], KafkaAdminClient],
        cluster: str,
        prefix: str,
        *,
        wall_clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._admin = admin  # called only when a request is due: most batches send none
        self._cluster = cluster
        self._prefix = prefix
        self._wall_clock = wall_clock
        self._monotonic = monotonic

    def register(self, owner: str, location: str, partitions: Iterable[tuple[str, int]]) -> None:
        """Record ``location`` for ``owner``, at most once an hour per process. The offset is
        committed on a partition the query writes (``partitions``): a commit must name an
        existing partition, and the sink's principal may read no other. Never raises: the
        registry must not fail a batch."""
        group = registry_group(self._prefix, owner)
        key = (self._cluster, group, location)
        last = _registered.get(key)
        if last is not None and self._monotonic() - last < REFRESH_S:
            return
        partition = min(partitions, default=None)
        if partition is None:
            return  # nothing written yet: the next batch with output registers
        _registered[key] = self._monotonic()  # a failure is retried an hour later, not per batch
        try:
            self._warn_if_elsewhere(owner, location)
            entry = Registration(location, int(self._wall_clock() * 1000))
            offsets = {
                TopicPartition(*partition): OffsetAndMetadata(
                    _NO_POSITION, entry.to_metadata(), None
                )
            }
            errors = self._call(
                lambda: self._admin().alter_group_offsets(group, offsets),
                f"OffsetCommit of {group}",
            )
            failed = [e for e in errors.values() if e is not Errors.NoError]
            why = ", ".join(e.__name__ for e in failed)
        except Exception as exc:  # an unreachable group coordinator, a bad SSL file, ...
            failed, why = [type(exc)], repr(exc)
        if failed:
            denied = any(issubclass(e, Errors.AuthorizationError) for e in failed)
            fix = (
                f"Grant READ on the consumer group {group} (a prefixed GROUP ACL on "
                f"{self._prefix!r}) and on topic {partition[0]!r}"
                if denied
                else "See docs/sink.md, 'The owner registry'"
            )
            _log.warning(
                "could not record this query's checkpoint location %r in consumer group %s "
                "(%s): if another query uses the prefix %r, its error cannot name this "
                "location. Nothing else depends on it. %s",
                location, group, why, self._prefix, fix,
            )  # fmt: skip

    def lookup(self, owners: Iterable[str]) -> dict[str, Entry]:
        """Each owner's registration, or why it is unknown. Never raises."""
        entries: dict[str, Entry] = {}
        for owner in owners:
            group = registry_group(self._prefix, owner)
            try:
                offsets = self._call(
                    lambda g=group: self._admin().list_group_offsets({g: None})[g],
                    f"OffsetFetch of {group}",
                )
            except Exception as exc:
                entries[owner] = Unknown(f"consumer group {group} could not be read ({exc!r})")
                continue
            found = [Registration.from_metadata(o.metadata) for o in offsets.values()]
            registered = max((r for r in found if r), key=lambda r: r.registered_ms, default=None)
            entries[owner] = registered or Unknown(
                f"no registration in consumer group {group}: the query runs a kafka-eos release "
                "before the registry, could not register (see its driver's log), or its "
                "registration expired (offsets.retention.minutes) after it stopped"
            )
        return entries

    @staticmethod
    def _call(operation: Callable[[], T], action: str) -> T:
        """A group call, retried while the group coordinator loads or moves (a new cluster
        creates its offsets topic on the first group request)."""
        return call_with_retries(
            operation,
            deadline=Deadline(_TIMEOUT_S),
            action=action,
            is_retriable=lambda exc: isinstance(exc, Errors.KafkaError) and exc.retriable,
        )

    def _warn_if_elsewhere(self, owner: str, location: str) -> None:
        """The same owner at another location: a checkpoint copied (both copies running would
        share transactional ids and abort each other's transactions) or moved (harmless)."""
        entry = self.lookup([owner])[owner]
        moved = isinstance(entry, Registration) and (
            canonical_location(entry.location) != canonical_location(location)
        )
        if moved:
            _log.warning(
                "query owner %s was last registered at %s, and now runs at %r. If the "
                "checkpoint was copied and the original still runs, the two share "
                "transactional ids and fail each other's batches: stop one. If it was moved, "
                "nothing is wrong",
                owner, entry.describe(int(self._wall_clock() * 1000)), location,
            )  # fmt: skip


def locate_queries(
    admin: Callable[[], KafkaAdminClient], cluster: str, transactional_ids: Iterable[str]
) -> dict[OwnedId, Entry]:
    """Where the query behind each id that a kafka-eos sink named checkpoints: what tells an
    operator which query owns a prefix, derived (``kafka-eos-<name>-<hash>``) or not. One
    request per (prefix, owner); ids of other clients are left out. Never raises."""
    by_prefix: dict[str, set[str]] = {}
    for owned in filter(None, map(OwnedId.parse, transactional_ids)):
        by_prefix.setdefault(owned.prefix, set()).add(owned.owner)
    return {
        OwnedId(prefix, owner): entry
        for prefix, owners in sorted(by_prefix.items())
        for owner, entry in OwnerRegistry(admin, cluster, prefix).lookup(sorted(owners)).items()
    }
