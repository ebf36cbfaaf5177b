"""The driver's questions to Kafka: which partitions to read, and where they start and end.

One consumer that is never assigned and never subscribed answers them. Offsets come from a
single batched ListOffsets per call (``offsets_for_times`` with Kafka's special timestamps -2
earliest and -1 latest). The consumer has the query's ``isolation.level``, so under
``read_committed`` "latest" is the partition's **last stable offset**: every offset below it
is decided (committed, aborted or a marker), and executors can always read up to it.

Every call is bounded by ``kafka.default.api.timeout.ms``; retriable errors are retried until
then, other errors fail at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from checkpoint.deadline import Deadline, call_with_retries
from connectors.kafka.offsets import EARLIEST, LATEST, PartitionKey, PartitionOffsets, describe
from connectors.kafka.source_client import is_transient, open_consumer
from connectors.kafka.source_errors import KafkaSourceError, SourceOptionError
from connectors.kafka.source_options import OffsetBound, SourceOptions

_log = logging.getLogger(__name__)
# Java's consumer leaves internal topics out of pattern subscriptions (exclude.internal.topics).
_INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
_POLL_S = 0.1
T = TypeVar("T")


class KafkaOffsetReader:
    """Partition discovery and offset lookups for the driver.

    >>> reader = KafkaOffsetReader(options, group_id="spark-kafka-source-1234-driver")
    >>> reader.latest(reader.partitions())   # the LSO per partition under read_committed
    {('orders', 0): 1200, ('orders', 1): 1187}
    >>> reader.close()
    """

    def __init__(self, options: SourceOptions, group_id: str) -> None:
        self._options = options
        self._group_id = group_id
        self._consumer: Consumer | None = None
        self._commit_results: list[tuple[KafkaError | None, list[TopicPartition]]] = []

    def _client(self) -> Consumer:
        if self._consumer is None:
            self._consumer = open_consumer(
                self._options,
                self._group_id,
                on_commit=lambda error, parts: self._commit_results.append((error, parts)),
            )
        return self._consumer

    def close(self) -> None:
        if self._consumer is not None:
            consumer, self._consumer = self._consumer, None
            consumer.close()

    def partitions(self) -> list[PartitionKey]:
        """The partitions the subscription covers now, sorted; missing topics have none."""
        subscription = self._options.subscription
        metadata = self._call("list topics", lambda d: self._client().list_topics(timeout=d))
        found = {
            (name, p)
            for name, topic in metadata.topics.items()
            if topic.error is None
            for p in topic.partitions
        }
        if subscription.kind == "assign":
            return sorted(found & set(subscription.partitions))
        return sorted(
            key for key in found if key[0] not in _INTERNAL_TOPICS and subscription.matches(key[0])
        )

    def latest(self, keys: Iterable[PartitionKey]) -> PartitionOffsets:
        """The end per partition: the last stable offset under ``read_committed``, else the
        high watermark."""
        return self.list_offsets(dict.fromkeys(keys, LATEST))

    def list_offsets(self, query: Mapping[PartitionKey, int]) -> PartitionOffsets:
        """Offsets for timestamps in ms, or -2 (earliest) / -1 (latest); -1 in the answer
        means no record has a timestamp at or after the one asked for."""
        if not query:
            return {}
        request = [TopicPartition(t, p, stamp) for (t, p), stamp in sorted(query.items())]

        def lookup(remaining: float) -> PartitionOffsets:
            answer = self._client().offsets_for_times(request, timeout=remaining)
            for tp in answer:
                if tp.error is not None:
                    raise KafkaException(tp.error)
            return {(tp.topic, tp.partition): tp.offset for tp in answer}

        return self._call("list offsets", lookup)

    def resolve(self, bound: OffsetBound, keys: list[PartitionKey]) -> PartitionOffsets:
        """Concrete offsets for a starting or ending option, per partition of ``keys``.

        Specific offsets and per-partition timestamps must name every partition, as in Spark:
        a partition left out would otherwise start somewhere the user did not choose.
        """
        if bound.kind == "earliest":
            return self.list_offsets(dict.fromkeys(keys, EARLIEST))
        if bound.kind == "latest":
            return self.latest(keys)
        if bound.kind in ("offsets", "timestamps") and set(bound.offsets) != set(keys):
            raise SourceOptionError(
                bound.option,
                _render(bound.offsets),
                f"it must name exactly the partitions being read ({_render(keys)}); missing: "
                f"{_render(set(keys) - set(bound.offsets))}; not being read: "
                f"{_render(set(bound.offsets) - set(keys))}",
            )
        if bound.kind == "offsets":
            specials = {k: o for k, o in bound.offsets.items() if o in (EARLIEST, LATEST)}
            return {**bound.offsets, **self.list_offsets(specials)}
        stamps = (
            bound.offsets if bound.kind == "timestamps" else dict.fromkeys(keys, bound.timestamp)
        )
        found = self.list_offsets(stamps)
        unmatched = sorted(key for key, offset in found.items() if offset < 0)
        if not unmatched:
            return found
        if bound.option.startswith("starting") and self._options.timestamp_strategy == "error":
            raise SourceOptionError(
                bound.option,
                _render({key: stamps[key] for key in unmatched}),
                "no record of these partitions has a timestamp at or after the one given. Set "
                "startingOffsetsByTimestampStrategy=latest to start them at their latest offset",
            )
        # Spark's rule: a partition with no record at or after the timestamp ends (or, with
        # the "latest" strategy, starts) at its latest offset.
        return {**found, **self.latest(unmatched)}

    def commit(self, offsets: PartitionOffsets) -> None:
        """Commit a completed batch's end to ``kafka.group.id`` so that lag monitors see it.

        Monitoring only: recovery reads Spark's offset log, never these commits (as Flink's
        KafkaSource), so a failure here is logged and the query goes on.
        """
        consumer = self._client()
        self._commit_results.clear()
        try:
            consumer.commit(
                offsets=[TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())],
                asynchronous=True,
            )
            deadline = Deadline(self._options.api_timeout_s)
            while not self._commit_results and not deadline.expired():
                consumer.poll(deadline.bound(_POLL_S))
        except KafkaException as exc:
            self._commit_results.append((exc.args[0], []))
        if not self._commit_results:
            _log.warning(
                "kafka-eos source: committing offsets to group %s timed out", self._group_id
            )
            return
        error, parts = self._commit_results[0]
        failed = [describe((tp.topic, tp.partition)) for tp in parts if tp.error is not None]
        if error is not None or failed:
            _log.warning(
                "kafka-eos source: committing offsets to group %s for lag monitoring failed "
                "(%s; partitions %s); the query is unaffected",
                self._group_id,
                error,
                failed,
            )

    def _call(self, action: str, operation: Callable[[float], T]) -> T:
        """Run ``operation(timeout_s)``, retried, within ``kafka.default.api.timeout.ms``."""
        deadline = Deadline(self._options.api_timeout_s)
        what = (
            f"kafka-eos source: {action} at {self._options.bootstrap_servers} (bounded by "
            f"kafka.default.api.timeout.ms={self._options.api_timeout_s * 1000:.0f})"
        )
        try:
            return call_with_retries(
                lambda: operation(max(deadline.remaining(), _POLL_S)),
                deadline=deadline,
                action=what,
                is_retriable=_retriable,
            )
        except KafkaException as exc:
            raise KafkaSourceError(f"{what} failed: {exc.args[0].str()}") from exc


def _retriable(exc: BaseException) -> bool:
    return isinstance(exc, KafkaException) and is_transient(exc.args[0])


def _render(keys: Iterable[PartitionKey] | Mapping[PartitionKey, int]) -> str:
    """``t-0, t-1`` or ``t-0=5, t-1=7``: partitions the way Kafka's tools print them."""
    if isinstance(keys, Mapping):
        return ", ".join(f"{describe(k)}={v}" for k, v in sorted(keys.items())) or "none"
    return ", ".join(describe(k) for k in sorted(keys)) or "none"
