"""The source's Kafka clients: the assign-only consumer and the driver's admin, built from
the ``kafka.*`` options that parsing let through (:meth:`SourceOptions.parse`), and the
checks that a partition is really gone."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from checkpoint.deadline import Clock, Deadline
from connectors.kafka.client_config import LIBRDKAFKA_LOGGER
from connectors.kafka.source.errors import SourceOptionError
from connectors.kafka.source.offsets import PartitionKey, describe
from connectors.kafka_keys import SOURCE

if TYPE_CHECKING:
    from confluent_kafka.admin import ClusterMetadata

    from connectors.kafka.source.options import SourceOptions

_log = logging.getLogger(__name__)


# Errors a later attempt can overcome, beyond those librdkafka flags as retriable.
_TRANSIENT = frozenset(
    {
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        # A new leader whose high watermark has not caught up yet (KIP-207), just after a
        # broker died: it answers offset requests again within moments.
        KafkaError.OFFSET_NOT_AVAILABLE,
        # A broker's handle dropped with the request in flight (a broker that restarted, seen
        # in a chaos run): the request fails whole, and the next try goes to a live handle.
        KafkaError._DESTROY_BROKER,
    }
)
# "Unknown topic or partition": gone, or not known yet to the broker that answered. Neither
# kind by itself: a caller decides, with confirmed_absent.
UNKNOWN_PARTITION = frozenset(
    {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC, KafkaError._UNKNOWN_PARTITION}
)
# What confirms that a partition does not exist (confirmed_absent): "unknown" in every answer
# for at least _GONE_CONFIRM_S and in at least _GONE_ANSWERS rounds in a row, and, in a cluster
# of several brokers, from two of them; at most _GONE_CLIENTS_PER_BROKER fresh clients per
# broker are tried to hear a second one, each waiting at most _GONE_ASK_S for an answer.
_GONE_CONFIRM_S = 2.0
_GONE_POLL_S = 0.5
_GONE_ANSWERS = 3
_GONE_CLIENTS_PER_BROKER = 2
_GONE_ASK_S = 5.0
# When no second broker can be told apart (a bootstrap address behind a load balancer or DNS
# alias), one broker's answers confirm once they have said "absent" at every check for this
# long: a lagging broker catches up within seconds, and a deletion must not hang a query.
_GONE_ONE_BROKER_S = 30.0
# Since when each key has been found absent at every check in this process without a second
# broker to agree (a key shown present at any check is forgotten).
_absent_since: dict[PartitionKey, float] = {}


def consumer_config(options: SourceOptions, group_id: str) -> dict[str, object]:
    """librdkafka settings for an assign-only consumer that never commits on its own."""
    return {
        **options.client_config,
        "bootstrap.servers": options.bootstrap_servers,
        "group.id": group_id,
        "isolation.level": options.isolation_level,
        **SOURCE.forced,
    }


def consumer_identity(options: SourceOptions, group_id: str, **settings: object) -> tuple:
    """The librdkafka configuration :func:`open_consumer` gives, as a hashable key: consumers
    with equal identities are interchangeable."""
    config = {**consumer_config(options, group_id), **settings}
    return tuple(sorted((key, str(value)) for key, value in config.items()))


def open_consumer(options: SourceOptions, group_id: str, **settings: object) -> Consumer:
    """A confluent-kafka consumer whose logs go to Python logging, not straight to stderr.

    ``settings`` override the defaults: librdkafka callbacks such as ``on_commit``, or the
    range reader's ``enable.partition.eof``.
    """
    config = {**consumer_config(options, group_id), "logger": LIBRDKAFKA_LOGGER, **settings}
    try:
        return Consumer(config)
    except KafkaException as exc:
        raise _rejected(options, exc) from exc


def open_admin(options: SourceOptions) -> AdminClient:
    """An admin client with the query's ``kafka.*`` options, for the driver's requests a
    consumer cannot send (metadata of several topics at once, broker configs)."""
    config = {
        **options.client_config,
        "bootstrap.servers": options.bootstrap_servers,
        "logger": LIBRDKAFKA_LOGGER,
    }
    try:
        return AdminClient(config)
    except KafkaException as exc:
        raise _rejected(options, exc) from exc


def _rejected(options: SourceOptions, exc: KafkaException) -> SourceOptionError:
    keys = ", ".join(f"kafka.{key}" for key in sorted(options.client_config)) or "none"
    return SourceOptionError(
        "kafka.*",
        keys,
        f"librdkafka rejected the client configuration: {exc.args[0].str()}. Options "
        "prefixed kafka. are passed to librdkafka without the prefix, so they must use "
        "librdkafka's names (see librdkafka's CONFIGURATION.md), not the Java client's",
    )


def is_transient(error: KafkaError) -> bool:
    """Whether waiting can overcome ``error``: no leader yet, a broker briefly unreachable."""
    return not error.fatal() and (error.retriable() or error.code() in _TRANSIENT)


def confirmed_absent(
    consumer: Consumer,
    keys: Iterable[PartitionKey],
    connect: Callable[[], Consumer] | None,
    *,
    clock: Clock = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> set[PartitionKey]:
    """Those of ``keys`` that Kafka confirms do not exist: the topic was deleted (or never
    created), or recreated without that partition.

    One answer saying "unknown" proves nothing: a broker that has not learnt of a topic yet, or
    one that has just restarted, says so for a topic that exists, and a listing of all topics
    leaves out the topics the client may not describe (a brief ACL change). So all ``keys`` are
    checked together, and a key is confirmed only when:

    1. for at least ``_GONE_CONFIRM_S`` and in at least ``_GONE_ANSWERS`` rounds in a row,
       every answer ``consumer`` gets says it does not exist: a lookup of its topic by name
       (UNKNOWN_TOPIC_OR_PART, or the topic without that partition), and a listing of all
       topics (the topic, or the partition, left out);
    2. in a cluster of several brokers, answers from two brokers said so. librdkafka sends one
       client's metadata requests to one broker, so fresh clients from ``connect`` are asked
       too, until a second broker has answered (the answer names its broker). Where no second
       broker can be told apart, step 1 must have held at every check of this process for
       ``_GONE_ONE_BROKER_S``.

    Any answer that shows the partition, or gives its topic another error (not authorized, no
    leader: the topic is there, or may be), clears that key. A request that fails (timed out,
    no broker reachable) proves nothing, so nothing is confirmed; the caller asks again later.
    Takes ``_GONE_CONFIRM_S`` or a little more when a key is absent; one round when every key
    shows up again.
    """
    asked = frozenset(keys)
    candidates = set(asked)
    if not candidates:
        return set()
    window = Deadline(_GONE_CONFIRM_S, clock=clock)
    heard: set[int | None] = set()
    brokers: set[int] = set()
    rounds = 0
    try:
        while True:
            # Step 1
            timeout = max(window.remaining(), _GONE_POLL_S)
            for answer in _answers(consumer, candidates, timeout):
                candidates -= answer.shown
                heard.add(answer.broker)
                brokers.update(answer.brokers)
            rounds += 1
            if not candidates or (window.expired() and rounds >= _GONE_ANSWERS):
                break
            sleep(window.bound(_GONE_POLL_S))
    except KafkaException as exc:
        _log.info("kafka-eos source: not confirming %s absent: %s", _names(asked), exc)
        return set()
    for key in asked - candidates:
        _absent_since.pop(key, None)
    if candidates and len(brokers) > 1:
        # Step 2
        _hear_second_broker(connect, candidates, heard, len(brokers))
        for key in asked - candidates:
            _absent_since.pop(key, None)
        if len(heard - {None}) < 2:
            now = clock()
            long_enough = {
                key
                for key in candidates
                if now - _absent_since.setdefault(key, now) >= _GONE_ONE_BROKER_S
            }
            if long_enough != candidates:
                _log.info(
                    "kafka-eos source: not confirming %s absent yet: heard one broker of %d",
                    _names(candidates - long_enough),
                    len(brokers),
                )
            candidates = long_enough
    for key in candidates:
        _absent_since.pop(key, None)
    return candidates


class _Answer:
    """One metadata answer, read for the candidate keys: which it shows (or may show) to
    exist, the broker that gave it, and the brokers of the cluster."""

    def __init__(
        self, metadata: ClusterMetadata, candidates: set[PartitionKey], named: str | None
    ) -> None:
        self.brokers = set(metadata.brokers)
        self.broker = _answered_by(metadata)
        self.shown = {
            key
            for key in candidates
            if (named is None or key[0] == named) and not _absent(metadata, *key)
        }


def _answers(client: Consumer, candidates: set[PartitionKey], timeout: float) -> Iterator[_Answer]:
    """One round: a lookup by name of each candidate topic, then a listing of all topics.

    By name, a broker answers "not authorized" for a topic the client may not describe, where
    a listing leaves it out; a listing comes from one request of its own, so one fluke answer
    cannot speak for both.
    """
    for topic in sorted({topic for topic, _ in candidates}):
        if any(key[0] == topic for key in candidates):  # the caller removes the keys shown
            yield _Answer(client.list_topics(topic, timeout=timeout), candidates, topic)
    if candidates:
        yield _Answer(client.list_topics(timeout=timeout), candidates, None)


def _absent(metadata: ClusterMetadata, topic: str, partition: int) -> bool:
    found = metadata.topics.get(topic)
    if found is None:
        return True
    if found.error is None:
        return partition not in found.partitions
    return found.error.code() in UNKNOWN_PARTITION


def _answered_by(metadata: ClusterMetadata) -> int | None:
    """The id of the broker that answered; librdkafka gives -1 for a bootstrap connection,
    which its address identifies."""
    if metadata.orig_broker_id >= 0:
        return metadata.orig_broker_id
    # "host:port/bootstrap", or "sasl_ssl://host:port/bootstrap" for any other protocol than
    # plaintext; an address that names no broker (a load balancer, an alias) tells nothing.
    address = (metadata.orig_broker_name or "").split("://")[-1].split("/")[0]
    for broker in metadata.brokers.values():
        if f"{broker.host}:{broker.port}" == address:
            return broker.id
    return None


def _hear_second_broker(
    connect: Callable[[], Consumer] | None,
    candidates: set[PartitionKey],
    heard: set[int | None],
    brokers: int,
) -> None:
    """Ask fresh clients until two brokers said the candidates are absent (updates both sets).

    A fresh client that cannot get an answer proves nothing and is skipped."""
    if connect is None:
        return
    for _ in range(_GONE_CLIENTS_PER_BROKER * brokers):
        if not candidates or len(heard - {None}) >= 2:
            return
        client = connect()
        try:
            for answer in _answers(client, candidates, _GONE_ASK_S):
                candidates -= answer.shown
                heard.add(answer.broker)
        except KafkaException:
            continue
        finally:
            client.close()


def _names(keys: Iterable[PartitionKey]) -> str:
    return ", ".join(describe(key) for key in sorted(keys))
