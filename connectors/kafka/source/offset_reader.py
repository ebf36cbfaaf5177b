"""The driver's questions to Kafka: which partitions to read, and where they start and end.

One consumer that is never assigned and never subscribed answers them. Offsets come from a
single batched ListOffsets per call (``offsets_for_times`` with Kafka's special timestamps -2
earliest and -1 latest). The consumer has the query's ``isolation.level``, so under
``read_committed`` "latest" is the partition's **last stable offset**: every offset below it
is decided (committed, aborted or a marker), and executors can always read up to it.

Starting timestamps are the exception: they are looked up with ``read_uncommitted``
semantics (a second consumer), because a broker asked under ``read_committed`` answers "no
offset" for a timestamp whose first match lies at or beyond the LSO, although the record
exists. A stream then starts at that match and waits there until the transactions before it
end (:meth:`latest_since` holds the partition's end at its start meanwhile).

Every call is bounded by ``kafka.default.api.timeout.ms``; retriable errors, also those of
single topics and partitions in an answer, are retried until then; other errors fail at once.

One metadata answer that leaves a partition out, or calls its topic unknown, is never acted
on alone: a partition the query has planned counts as deleted, and a topic or partition that
``subscribe`` or ``assign`` names counts as absent at the start, only once
:func:`~connectors.kafka.source.client.confirmed_absent` confirms it (:meth:`latest_since`,
:meth:`partitions_to_start`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from checkpoint.deadline import Deadline, call_with_retries
from connectors.kafka.source.client import (
    UNKNOWN_PARTITION,
    confirmed_absent,
    is_transient,
    open_admin,
    open_consumer,
)
from connectors.kafka.source.errors import KafkaSourceError, SourceOptionError
from connectors.kafka.source.lag import DEFAULT_TRANSACTION_MAX_TIMEOUT_MS
from connectors.kafka.source.offsets import (
    EARLIEST,
    LATEST,
    PartitionKey,
    PartitionOffsets,
    describe,
    render,
)
from connectors.kafka.source.options import (
    BoundKind,
    BoundSide,
    OffsetBound,
    SourceOptions,
    SubscriptionKind,
)

_log = logging.getLogger(__name__)
# Java's consumer leaves internal topics out of pattern subscriptions (exclude.internal.topics).
_INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
_POLL_S = 0.1
# Errors of one partition in a ListOffsets answer that a later attempt overcomes: leadership
# or leader epochs moving, an offset not available just after a leader election, a slow
# broker, partition metadata not caught up yet. librdkafka retries some of them itself, a few
# times at most, and returns OFFSET_NOT_AVAILABLE and NOT_LEADER at once.
_RETRIABLE_PARTITION_ERRORS = frozenset(
    {
        KafkaError.OFFSET_NOT_AVAILABLE,
        KafkaError.FENCED_LEADER_EPOCH,
        KafkaError.UNKNOWN_LEADER_EPOCH,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.REPLICA_NOT_AVAILABLE,
        KafkaError.KAFKA_STORAGE_ERROR,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        # librdkafka's answer, without a request, for a partition its metadata cache lacks:
        # one added since the cache was filled (list_offsets refreshes it before the retry).
        KafkaError._UNKNOWN_PARTITION,
    }
)
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
        # Starting timestamps are looked up under read_uncommitted (resolve); None until used.
        self._uncommitted: Consumer | None = None
        self._admin_client: AdminClient | None = None
        self._commit_results: list[tuple[KafkaError | None, list[TopicPartition]]] = []

    def _client(self) -> Consumer:
        if self._consumer is None:
            self._consumer = open_consumer(
                self._options,
                self._group_id,
                on_commit=lambda error, parts: self._commit_results.append((error, parts)),
            )
        return self._consumer

    def _uncommitted_client(self) -> Consumer:
        """A consumer with ``read_uncommitted``: ListOffsets capped at the high watermark."""
        if self._options.isolation_level == "read_uncommitted":
            return self._client()
        if self._uncommitted is None:
            self._uncommitted = open_consumer(
                self._options, self._group_id, **{"isolation.level": "read_uncommitted"}
            )
        return self._uncommitted

    def close(self) -> None:
        if self._consumer is not None:
            consumer, self._consumer = self._consumer, None
            consumer.close()
        if self._uncommitted is not None:
            uncommitted, self._uncommitted = self._uncommitted, None
            uncommitted.close()
        self._admin_client = None  # an AdminClient has no close: it ends when collected

    def partitions(self) -> list[PartitionKey]:
        """The partitions the subscription covers in one metadata answer, sorted; a topic the
        answer does not know has none there.

        One answer only: callers that would act on a partition being left out confirm it
        first (:meth:`latest_since`, :meth:`partitions_to_start`). A topic with a transient
        error is asked again within the deadline. A topic the query may not describe fails at
        once.
        """
        subscription = self._options.subscription

        def lookup(remaining: float) -> set[PartitionKey]:
            return {
                (name, p)
                for name, partitions in self._topics(remaining).items()
                for p in partitions
            }

        found = self._call("list topics", lookup)
        if subscription.kind == SubscriptionKind.ASSIGN:
            return sorted(found & set(subscription.partitions))
        return sorted(
            key for key in found if key[0] not in _INTERNAL_TOPICS and subscription.matches(key[0])
        )

    def partitions_to_start(self) -> list[PartitionKey]:
        """The partitions a query starts with (``initialOffset``, a batch read), sorted.

        ``subscribe`` and ``assign`` name their topics and partitions, so one the answer
        leaves out is left out only once its absence is confirmed: an answer calling a topic
        unknown for a moment would otherwise leave it out of a batch read, start it at offset
        0 instead of ``startingOffsets`` when it shows up, or fail an ``assign`` that names
        it. Answers that contradict each other are asked again, within
        ``kafka.default.api.timeout.ms``. ``subscribePattern`` names nothing that could be
        missing: its start is one listing, as in Spark.
        """
        subscription = self._options.subscription
        named = (
            set(subscription.partitions)
            if subscription.kind == SubscriptionKind.ASSIGN
            else {(topic, 0) for topic in subscription.topics}  # every topic has partition 0
        )
        deadline = Deadline(self._options.api_timeout_s)
        while True:
            found = self.partitions()
            missing = named - set(found)
            if not missing or self.absent(missing) == missing:
                return found
            if deadline.expired():
                raise KafkaSourceError(
                    f"kafka-eos source: Kafka's metadata answers at "
                    f"{self._options.bootstrap_servers} kept disagreeing on whether "
                    f"{render(missing)} exist, for kafka.default.api.timeout.ms="
                    f"{self._options.api_timeout_s * 1000:.0f}. Check that every broker is up "
                    "and has caught up with the cluster's metadata"
                )
            _log.info("kafka-eos source: %s not confirmed absent; asking again", render(missing))

    def latest_since(
        self, start: Mapping[PartitionKey, int]
    ) -> tuple[PartitionOffsets, PartitionOffsets]:
        """The latest offsets now, and the partitions of ``start`` this answer left out whose
        deletion is not confirmed, at their start offsets ("held").

        A partition of ``start`` has been planned, so it existed: one metadata answer leaving
        it out proves nothing. Dropped from a batch end, it would be reported as data loss
        (with ``failOnDataLoss=true`` on every replay of that batch) or, with ``false``, read
        again from offset 0 as a new partition when it shows up, duplicating its history. It
        is left out of the latest offsets, and so taken for deleted, only once
        :meth:`absent` confirms it; until then it is held at its start, so that the next
        batch resumes it there.
        """
        latest = self._waiting_at_start(self.latest(self.partitions()), start)
        missing = sorted(key for key in start if key not in latest and self._covers(key))
        if not missing:
            return latest, {}
        gone = self.absent(missing)
        held = {key: start[key] for key in missing if key not in gone}
        if held:
            _log.warning(
                "kafka-eos source: %s left out of Kafka's metadata answer, but not confirmed "
                "deleted; kept at offsets %s until an answer shows them again",
                render(held.keys()),
                render(held),
            )
        return latest, held

    def _waiting_at_start(
        self, latest: PartitionOffsets, start: Mapping[PartitionKey, int]
    ) -> PartitionOffsets:
        """``latest``, where a start above the LSO is held at that start.

        A start found by timestamp may lie beyond the LSO, in or after a transaction still
        open (:meth:`resolve`). Its offsets exist, up to the high watermark: the partition
        waits there for the transactions before it to end, so its end is its start, never
        the lower LSO (which the batch planner would take for a log that went back, and
        report as data loss). A start above the high watermark too did go back.
        """
        above = {
            key: offset
            for key, offset in start.items()
            if key in latest and 0 <= latest[key] < offset
        }
        if not above or self._options.isolation_level != "read_committed":
            return latest
        high = self.high_watermarks(above)
        waiting = {key: offset for key, offset in above.items() if offset <= high.get(key, -1)}
        return {**latest, **waiting}

    def absent(self, keys: Iterable[PartitionKey]) -> set[PartitionKey]:
        """Those of ``keys`` whose absence Kafka confirms (``confirmed_absent``): two seconds
        or more of metadata answers that agree, from two brokers where there are several."""
        return confirmed_absent(
            self._client(), keys, lambda: open_consumer(self._options, self._group_id)
        )

    def _covers(self, key: PartitionKey) -> bool:
        """Whether the subscription covers ``key`` (it may not after a restart with other
        subscription options; such a partition is dropped, as in Spark)."""
        subscription = self._options.subscription
        if subscription.kind == SubscriptionKind.ASSIGN:
            return key in subscription.partitions
        return key[0] not in _INTERNAL_TOPICS and subscription.matches(key[0])

    def _topics(self, remaining: float) -> dict[str, frozenset[int]]:
        """The partitions of each subscribed topic Kafka knows, in **one** Metadata request.

        Named topics (``subscribe``, ``assign``) are described by name, all in one request, so
        that the broker answers "not authorized" instead of leaving them out, and a query on
        100 topics pays one round trip per trigger, not 100. ``subscribePattern`` needs every
        topic's name: one listing of the cluster. A topic the answer does not know is left
        out; one the query may not describe fails at once; another error of a topic is raised
        (retried by the caller if transient).
        """
        subscription = self._options.subscription
        if subscription.kind == SubscriptionKind.SUBSCRIBE_PATTERN:
            found: dict[str, frozenset[int]] = {}
            for name, topic in self._client().list_topics(timeout=remaining).topics.items():
                if topic.error is None:
                    found[name] = frozenset(topic.partitions)
                else:
                    self._topic_error(name, topic.error)
            return found
        names = subscription.topics or sorted({topic for topic, _ in subscription.partitions})
        answers = self._admin().describe_topics(
            TopicCollection(list(names)), request_timeout=remaining
        )
        found = {}
        for name, answer in answers.items():
            try:
                found[name] = frozenset(p.id for p in answer.result(timeout=remaining).partitions)
            except KafkaException as exc:
                self._topic_error(name, exc.args[0])
            except TimeoutError:  # Python's wait ended just before librdkafka's: retried
                raise KafkaException(KafkaError(KafkaError._TIMED_OUT)) from None
        return found

    def _topic_error(self, name: str, error: KafkaError) -> None:
        """Raise for a topic's error in a metadata answer, unless it says "unknown"."""
        if error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
            raise _not_authorized(name, self._options)
        if error.code() not in UNKNOWN_PARTITION:
            raise KafkaException(error)  # retried if transient

    def _admin(self) -> AdminClient:
        """The admin client for Metadata by topic names (a consumer asks one topic per
        request) and for broker configs, opened at the first need."""
        if self._admin_client is None:
            self._admin_client = open_admin(self._options)
        return self._admin_client

    def latest(self, keys: Iterable[PartitionKey]) -> PartitionOffsets:
        """The end per partition: the last stable offset under ``read_committed``, else the
        high watermark."""
        return self.list_offsets(dict.fromkeys(keys, LATEST))

    def high_watermarks(self, keys: Iterable[PartitionKey]) -> PartitionOffsets:
        """The high watermark per partition, whatever the query's isolation level."""
        return self.list_offsets(dict.fromkeys(keys, LATEST), uncommitted=True)

    def transaction_max_timeout_ms(self) -> int:
        """The broker's ``transaction.max.timeout.ms`` (one broker's, asked once by the
        caller), or Kafka's default 900000 when it cannot be read, which is logged."""
        try:
            metadata = self._client().list_topics(timeout=self._options.api_timeout_s)
            broker = str(min(metadata.brokers))
            admin = self._admin()
            resource = ConfigResource(ResourceType.BROKER, broker)
            futures = admin.describe_configs(
                [resource], request_timeout=self._options.api_timeout_s
            )
            entries = next(iter(futures.values())).result(timeout=self._options.api_timeout_s)
            return int(entries["transaction.max.timeout.ms"].value)
        except (KafkaException, KeyError, ValueError, TypeError, TimeoutError) as exc:
            _log.info(
                "kafka-eos source: could not read the broker's transaction.max.timeout.ms "
                "(%s); taking Kafka's default %d ms for the pinned-LSO warning",
                exc,
                DEFAULT_TRANSACTION_MAX_TIMEOUT_MS,
            )
            return DEFAULT_TRANSACTION_MAX_TIMEOUT_MS

    def list_offsets(
        self, query: Mapping[PartitionKey, int], *, uncommitted: bool = False
    ) -> PartitionOffsets:
        """Offsets for timestamps in ms, or -2 (earliest) / -1 (latest); -1 in the answer
        means no record has a timestamp at or after the one asked for, below the LSO under
        ``read_committed``, below the high watermark under ``read_uncommitted`` or with
        ``uncommitted``."""
        if not query:
            return {}
        request = [TopicPartition(t, p, stamp) for (t, p), stamp in sorted(query.items())]
        client = self._uncommitted_client if uncommitted else self._client

        def lookup(remaining: float) -> PartitionOffsets:
            try:
                answer = client().offsets_for_times(request, timeout=remaining)
                for tp in answer:
                    if tp.error is not None:
                        raise KafkaException(tp.error)
            except KafkaException as exc:
                if _retriable(exc):  # only a retry needs the cache refreshed
                    self._refresh(client(), {topic for topic, _ in query}, remaining)
                raise
            return {(tp.topic, tp.partition): tp.offset for tp in answer}

        return self._call("list offsets", lookup)

    @staticmethod
    def _refresh(client: Consumer, topics: Iterable[str], remaining: float) -> None:
        """Refresh ``client``'s metadata of ``topics`` after a failed ListOffsets.

        librdkafka sends ListOffsets to the leaders its metadata cache names, and keeps that
        cache for ``metadata.max.age.ms`` (15 min) unless an answer says "not leader". The
        consumer no longer asks for the subscribed topics' metadata itself (:meth:`_topics`
        asks the admin client, one request for all), so a partition added since answers
        ``_UNKNOWN_PARTITION`` locally, and a leader whose broker is down for good is asked
        again and again. Asking the topics anew updates the cache before the retry.
        """
        for topic in sorted(topics):
            try:
                client.list_topics(topic, timeout=remaining)
            except KafkaException as exc:
                _log.info("kafka-eos source: refreshing %s's metadata failed: %s", topic, exc)
                return

    def resolve(
        self, bound: OffsetBound, keys: list[PartitionKey], *, keep_latest: bool = False
    ) -> PartitionOffsets:
        """Offsets for a starting or ending option, per partition of ``keys``.

        Specific offsets and per-partition timestamps must name every partition, as in Spark:
        a partition left out would otherwise start somewhere the user did not choose.
        ``keep_latest`` leaves "latest" as -1 for the stream reader to pin in batch 0: a
        concrete latest found here would be lost with the driver's memory.

        A starting timestamp resolves to the first offset whose record has a timestamp at or
        after it, committed or not (looked up with ``read_uncommitted``): under
        ``read_committed`` it may lie at or beyond the LSO, in a transaction still open or
        after one. A stream (``keep_latest``) starts there and waits for those transactions to
        end (:meth:`latest_since`); a batch read, which ends at the LSO at most, starts such a
        partition at its LSO and reads nothing of it (:func:`start_by_timestamp`). Only a
        partition without such a record up to the high watermark follows
        ``startingOffsetsByTimestampStrategy``. Ending timestamps keep the query's isolation
        level: an end beyond the LSO would be lowered to it anyway.
        """

        def latest(found: Iterable[PartitionKey]) -> PartitionOffsets:
            return dict.fromkeys(found, LATEST) if keep_latest else self.latest(found)

        if bound.kind == BoundKind.EARLIEST:
            return self.list_offsets(dict.fromkeys(keys, EARLIEST))
        if bound.kind == BoundKind.LATEST:
            return latest(keys)
        if bound.kind.per_partition and set(bound.offsets) != set(keys):
            raise not_exactly_named(bound, keys)
        if bound.kind == BoundKind.OFFSETS:
            earliest = {k: o for k, o in bound.offsets.items() if o == EARLIEST}
            latest_keys = [k for k, o in bound.offsets.items() if o == LATEST]
            return {**bound.offsets, **self.list_offsets(earliest), **latest(latest_keys)}
        if bound.kind == BoundKind.TIMESTAMPS:
            stamps = bound.offsets
        elif bound.kind == BoundKind.TIMESTAMP:
            stamps = dict.fromkeys(keys, bound.timestamp)
        else:  # a new kind must say how it resolves, not fall into a timestamp lookup
            raise ValueError(f"no resolution for offset bound {bound!r}")
        starting = bound.side == BoundSide.START
        found = self.list_offsets(stamps, uncommitted=starting)
        if starting and not keep_latest and self._options.isolation_level == "read_committed":
            matched = [key for key, offset in found.items() if offset >= 0]
            found = start_by_timestamp(found, self.latest(matched))
        unmatched = sorted(key for key, offset in found.items() if offset < 0)
        if not unmatched:
            return found
        if starting and self._options.timestamp_strategy == "error":
            raise SourceOptionError(
                bound.option,
                render({key: stamps[key] for key in unmatched}),
                "no record of these partitions has a timestamp at or after the one given. Set "
                "startingOffsetsByTimestampStrategy=latest to start them at their latest offset",
            )
        # Spark's rule: a partition with no record at or after the timestamp ends (or, with
        # the "latest" strategy, starts) at its latest offset.
        return {**found, **latest(unmatched)}

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


def not_exactly_named(bound: OffsetBound, keys: Iterable[PartitionKey]) -> SourceOptionError:
    """The error for a JSON start or end that does not name exactly the partitions being
    read: a partition left out would start or end somewhere the user did not choose (as in
    Spark)."""
    keys = set(keys)
    return SourceOptionError(
        bound.option,
        render(bound.offsets),
        f"it must name exactly the partitions being read ({render(keys)}); missing: "
        f"{render(keys - set(bound.offsets))}; not being read: "
        f"{render(set(bound.offsets) - keys)}",
    )


def start_by_timestamp(
    found: Mapping[PartitionKey, int], end: Mapping[PartitionKey, int]
) -> PartitionOffsets:
    """A batch read's start from a timestamp's first match (read_uncommitted) per partition:
    the match, or the batch's end (the LSO) where the match lies beyond it; -1 (no match)
    stays. Records between the LSO and the match are before the timestamp, and those from
    the match on are beyond the read's end, so such a partition reads nothing, as it should.

    >>> start_by_timestamp({("t", 0): 5, ("t", 1): 9, ("t", 2): -1}, {("t", 0): 7, ("t", 1): 4})
    {('t', 0): 5, ('t', 1): 4, ('t', 2): -1}
    """
    return {
        key: min(offset, end[key]) if offset >= 0 and key in end else offset
        for key, offset in found.items()
    }


def _retriable(exc: BaseException) -> bool:
    if not isinstance(exc, KafkaException):
        return False
    error = exc.args[0]
    return is_transient(error) or error.code() in _RETRIABLE_PARTITION_ERRORS


def _not_authorized(topic: str, options: SourceOptions) -> KafkaSourceError:
    option = options.subscription.kind
    return KafkaSourceError(
        f"kafka-eos source: topic {topic} (source option {option}) is not readable at "
        f"{options.bootstrap_servers}: TOPIC_AUTHORIZATION_FAILED. Grant the query's principal "
        f"the Describe and Read ACLs on the topic (kafka-acls.sh --add --allow-principal ... "
        f"--operation Describe --operation Read --topic {topic}), or stop subscribing to it"
    )
