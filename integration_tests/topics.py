"""Topics for the integration tests, created and waited for until every broker knows them.

A module of its own, imported by the fixtures (``conftest.py``) and by the harnesses alike.
"""

from __future__ import annotations

import time
import uuid

from confluent_kafka.admin import AdminClient, NewTopic


def create_topic(
    bootstrap_servers: str,
    partitions: int = 1,
    replication: int = 1,
    name: str | None = None,
    config: dict[str, str] | None = None,
) -> str:
    """Create a topic (uniquely named unless ``name`` is given) and wait until it exists.

    The controller answers CreateTopics before every broker's metadata has the topic: a reader
    that asks at once (a drain of a topic nothing was written to) can be told
    UNKNOWN_TOPIC_OR_PART. So the topic exists when the metadata shows each partition's leader.
    """
    name = name or f"t-{uuid.uuid4().hex[:12]}"
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    new_topic = NewTopic(
        name, num_partitions=partitions, replication_factor=replication, config=config or {}
    )
    for future in admin.create_topics(
        [new_topic],
        operation_timeout=30,
    ).values():
        future.result(timeout=60)
    deadline = time.monotonic() + 60
    while not _has_leaders(admin, name, partitions):
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {name} was created but has no leaders after 60 s")
        time.sleep(0.1)
    return name


def _has_leaders(admin: AdminClient, topic: str, partitions: int) -> bool:
    metadata = admin.list_topics(topic, timeout=10).topics.get(topic)
    return (
        metadata is not None
        and metadata.error is None
        and len(metadata.partitions) == partitions
        and all(p.leader >= 0 for p in metadata.partitions.values())
    )
