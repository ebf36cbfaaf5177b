"""Read the facts the rules need from a live cluster, every call bounded by one deadline.

Uses confluent-kafka's ``AdminClient``: metadata (broker count, replication of the
output/source topics and of ``__transaction_state``) and ``describe_configs`` for one
broker and the named topics. Security options (``-X sasl.password=...``) are passed
through to the client and never appear in errors.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from checkpoint.deadline import Deadline
from checkpoint.errors import DeadlineExceeded
from connectors.options import is_digits
from connectors.policy.errors import LiveClusterError
from connectors.policy.inputs import (
    TRANSACTION_STATE_TOPIC,
    ClusterFacts,
    ClusterSnapshot,
    TopicFacts,
)
from connectors.redact import scrub, secret_values

AdminFactory = Callable[[dict[str, Any]], Any]
# librdkafka's own log lines (connection refused, retries...) go here, not to stderr.
_CLIENT_LOG = logging.getLogger(__name__)
# How a metadata request fails while librdkafka is still retrying: worth asking again.
_STILL_TRYING = {KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN}


class _AuthenticationErrors:
    """librdkafka's ``error_cb``: keeps the first authentication failure.

    librdkafka reports a rejected login only there, and keeps retrying: without it a wrong
    password looks like a slow cluster ("transport failure") until the deadline.
    """

    def __init__(self) -> None:
        self.first: KafkaError | None = None

    def __call__(self, error: KafkaError) -> None:
        if self.first is None and error.code() == KafkaError._AUTHENTICATION:
            self.first = error


def _metadata(admin: Any, deadline: Deadline, auth: _AuthenticationErrors) -> Any:
    """The cluster's metadata, asked for in short rounds so that a rejected login stops the
    wait at once instead of at the deadline."""
    while True:
        try:
            return admin.list_topics(timeout=deadline.bound(1.0))
        except KafkaException as exc:
            admin.poll(0)  # serves error_cb
            error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
            still_trying = error is not None and error.code() in _STILL_TRYING
            if auth.first is not None or deadline.expired() or not still_trying:
                raise


_MAX_TIMEOUT = "transaction.max.timeout.ms"


def read_cluster(
    bootstrap_servers: str,
    topics: Iterable[str],
    *,
    options: Mapping[str, str] | None = None,
    timeout_s: float = 15.0,
    admin_factory: AdminFactory = AdminClient,
) -> ClusterSnapshot:
    """Describe the cluster at ``bootstrap_servers`` and the given ``topics`` that exist;
    the ones that do not are listed as missing, for rules to report."""
    options = dict(options or {})
    names = tuple(dict.fromkeys(topics))
    secrets = secret_values([options])
    what = f"cluster {bootstrap_servers}"
    deadline = Deadline(timeout_s)
    auth = _AuthenticationErrors()
    try:
        config: dict[str, Any] = {"logger": _CLIENT_LOG, "error_cb": auth, **options}
        admin = admin_factory({**config, "bootstrap.servers": bootstrap_servers})
        metadata = _metadata(admin, deadline, auth)
        if not metadata.brokers:
            raise LiveClusterError(f"{what}: metadata lists no brokers")
        present = [t for t in names if t in metadata.topics]
        broker_id = (
            metadata.controller_id
            if metadata.controller_id in metadata.brokers
            else min(metadata.brokers)
        )
        broker_ids = [str(broker_id), *(str(b) for b in sorted(metadata.brokers) if b != broker_id)]
        configs = _describe(admin, broker_ids, present, deadline)
    except (KafkaException, TimeoutError, DeadlineExceeded, ValueError, TypeError) as exc:
        if auth.first is not None:
            raise LiveClusterError(
                f"{what}: authentication failed ({scrub(auth.first.str(), secrets)}). Check "
                "the client's sasl.username and sasl.password (sink options "
                "kafka.sasl.username / kafka.sasl.password; `kafka-eos` commands: -X sasl.*), "
                "and that sasl.mechanism and security.protocol match the broker's listener"
            ) from None
        raise LiveClusterError(f"{what}: {scrub(str(exc), secrets)}") from None
    described = {*present, TRANSACTION_STATE_TOPIC} & metadata.topics.keys()
    return ClusterSnapshot(
        broker_config=_strictest([configs.pop(("broker", b)) for b in broker_ids]),
        facts=ClusterFacts(
            broker_count=len(metadata.brokers),
            missing_topics=frozenset(names) - metadata.topics.keys(),
            topics={
                name: TopicFacts(
                    replication_factor=_replication(metadata.topics[name]),
                    config=configs.get(("topic", name), {}),
                )
                for name in sorted(described)
            },
        ),
    )


def _strictest(broker_configs: list[dict[str, str]]) -> dict[str, str]:
    """The first broker's config (the controller's), with the smallest
    ``transaction.max.timeout.ms`` of all: any broker may be a task's transaction coordinator,
    and one that has not yet taken a raised maximum (a rolling change) refuses a timeout above
    its own."""
    config = dict(broker_configs[0])
    maxima = [int(c[_MAX_TIMEOUT]) for c in broker_configs if is_digits(c.get(_MAX_TIMEOUT, ""))]
    if maxima:
        config[_MAX_TIMEOUT] = str(min(maxima))
    return config


def _describe(
    admin: Any, broker_ids: list[str], topics: list[str], deadline: Deadline
) -> dict[tuple[str, str], dict[str, str]]:
    """Non-sensitive, non-null config of the brokers and of ``topics``, keyed by resource.
    One broker per request (confluent-kafka refuses two), all requests at once."""
    first, *others = broker_ids
    requests = [[ConfigResource(ResourceType.BROKER, first)]]
    requests[0] += [ConfigResource(ResourceType.TOPIC, topic) for topic in topics]
    requests += [[ConfigResource(ResourceType.BROKER, broker_id)] for broker_id in others]
    futures = {}
    for resources in requests:
        deadline.check("describe_configs")
        futures.update(admin.describe_configs(resources, request_timeout=deadline.remaining()))
    described = {}
    for resource, future in futures.items():
        deadline.check("describe_configs")
        kind = "broker" if resource.restype == ResourceType.BROKER else "topic"
        entries = future.result(timeout=deadline.remaining())
        described[(kind, resource.name)] = {
            name: entry.value
            for name, entry in entries.items()
            if entry.value is not None and not entry.is_sensitive
        }
    return described


def _replication(topic: Any) -> int | None:
    """The smallest replica count over the topic's partitions: what a failure must beat."""
    counts = [len(partition.replicas) for partition in topic.partitions.values()]
    return min(counts) if counts else None
