"""Spark's own checkpoint files, read by the sink on the driver: the query's id (``metadata``)
and what Spark planned for a batch (``offsets/N``).

The sink keeps its commit decisions on the same storage, so it must see these files: a location
without a scheme is the cluster's default filesystem to Spark (``fs.defaultFS``, often HDFS) but
the driver's local disk to the sink; after a driver restart on another host the decisions would
be gone, and a half-committed batch would run again. So a file the sink cannot see stops it.
"""

from __future__ import annotations

import hashlib
import json

from checkpoint.errors import ConfigError
from checkpoint.store import read_location


def spark_plan_of(checkpoint_location: str, batch_id: int) -> str:
    """The fingerprint of Spark's ``offsets/<batch_id>``: what Spark planned for the batch."""
    entry = _spark_log_entry(checkpoint_location, f"offsets/{batch_id}")
    return "sha256:" + hashlib.sha256(entry).hexdigest()


def spark_query_id(checkpoint_location: str) -> str:
    """The id Spark gave the query in its checkpoint (``metadata``): stable across restarts,
    however the location is spelled, and different for two queries on look-alike paths of
    two clusters. The owner part of the query's transactional ids comes from it."""
    entry = _spark_log_entry(checkpoint_location, "metadata")
    try:
        return str(json.loads(entry)["id"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(
            f"option 'checkpointLocation' = {checkpoint_location!r}: Spark's metadata file "
            f"there holds {entry[:200]!r}, not a query id ({exc!r}); it was damaged or is not "
            "Spark's: restore it from a backup"
        ) from exc


def is_stream_checkpoint(location: str) -> bool:
    """Whether a streaming query keeps its checkpoint at ``location`` (Spark's ``metadata``)."""
    return read_location(f"{location.rstrip('/')}/metadata") is not None


def _spark_log_entry(location: str, name: str) -> bytes:
    """A file of Spark's own checkpoint, e.g. ``offsets/N``, which Spark wrote before it runs
    the batch."""
    entry = f"{location.rstrip('/')}/{name}"
    logged = read_location(entry)
    if logged is None:
        raise ConfigError(
            f"option 'checkpointLocation' = {location!r}: Spark keeps the query's {name} there, "
            f"but the sink, which keeps its commit decisions beside it, does not see {entry}. "
            "Spark resolves a location without a scheme against the cluster's default "
            "filesystem (fs.defaultFS), the sink against the driver's local disk. Give the "
            "location as a full URI, e.g. hdfs://namenode:8020/checkpoints/q or "
            "s3a://bucket/checkpoints/q"
        )
    return logged
