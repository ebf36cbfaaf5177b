"""Describe, list, end and fence Kafka transactions that another process opened.

A Kafka transaction belongs to the producer that opened it, and no client library can resume
one (confluent-kafka cannot; Flink reaches into the Java client by reflection). The protocol
can: EndTxn names the transaction by transactional id, producer id and epoch, which is exactly
what a committable records. kafka-python provides the requests and the admin calls
(DescribeTransactions, ListTransactions, FindCoordinator), so nothing here hand-writes the
wire format. A batch's EndTxns go to all its coordinators at once, under one deadline
(:mod:`connectors.kafka.txn_coordinators`). Commits are EndTxns; every abort is a fence
(:mod:`connectors.kafka.fence`), which no producer survives.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import kafka.errors as Errors
from kafka.admin import KafkaAdminClient
from kafka.net.compat import KafkaNetClient
from kafka.protocol.admin.transactions import DescribeTransactionsRequest
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.producer.transaction import WriteTxnMarkersRequest
from kafka.record.memory_records import MemoryRecords
from kafka.structs import TopicPartition

from checkpoint.deadline import Deadline, call_with_retries
from checkpoint.errors import DeadlineExceeded
from connectors.kafka.client_config import kafka_python_config
from connectors.kafka.end_txn import (
    RETRIABLE_END_TXN_ERRORS,
    EndTxnCall,
    EndTxnOutcome,
    EndTxnTarget,
    end_txn_version,
)
from connectors.kafka.fence import FenceOutcome, InitProducerIdCall, fence_all
from connectors.kafka.partition_txns import BatchHeader
from connectors.kafka.txn_coordinators import (
    EPOCH_BUMP_END_TXN_VERSION,
    IN_FLIGHT_PER_BROKER,
    CoordinatorAnswer,
    answer_of,
    broker_max_versions,
    call_coordinators,
)
from connectors.kafka.txn_state import TxnDescription, TxnState

# The transaction is no longer the one the caller named: ended, or fenced by a newer epoch.
# Only a describe can tell "already committed" from "lost".
ENDED_OR_FENCED_ERRORS: tuple[type[Exception], ...] = (
    Errors.InvalidProducerEpochError,
    Errors.ProducerFencedError,
    Errors.InvalidTxnStateError,
    Errors.InvalidProducerIdMappingError,
    Errors.TransactionalIdNotFoundError,
)
# Enough for one record batch's header, and a little of its records, which are not read.
_FIRST_BATCH_BYTES = 1024
# How long a marker's leader is asked for its API versions.
_VERSIONS_S = 5.0


class _DescribeCall:
    """DescribeTransactions, one request per coordinator."""

    retriable = RETRIABLE_END_TXN_ERRORS
    unsure = ()  # a describe changes nothing
    versioned = False

    def requests(self, ids: list[str], versions: Mapping[int, int]) -> list[tuple[Any, list[str]]]:
        return [(DescribeTransactionsRequest(transactional_ids=ids), ids)]

    def answers(self, response: Any, ids: list[str]) -> dict[str, tuple[type[Exception], Any]]:
        return {
            raw.transactional_id: (Errors.for_code(raw.error_code), raw)
            for raw in response.transaction_states
        }


def _unreachable(config: Mapping[str, Any], request_ms: int, reach_ms: int) -> DeadlineExceeded:
    return DeadlineExceeded(
        f"no broker of bootstrap.servers = {config['bootstrap_servers']} completed a "
        f"connection within {reach_ms} ms (request.timeout.ms = {request_ms}): the cluster is "
        "down or out of reach from here, or it refused the connection's security settings "
        "(security.protocol, sasl.*, ssl.*; the kafka.net log names the cause). Fix those, or "
        "wait longer: the sink's kafka.request.timeout.ms and commitTimeoutMs, the txn "
        "commands' --timeout. Nothing was sent: a decided batch stays decided, and the next "
        "start commits it"
    )


class TransactionAdmin:
    """Admin connections to one cluster, for the driver, the CLI and the writer's describe.

    Not thread-safe: describes and EndTxns run on one kafka-python client that the calling
    thread drives.
    """

    def __init__(
        self,
        client_config: Mapping[str, Any],
        request_timeout_ms: int = 30_000,
        *,
        reach_timeout_ms: int = 0,
    ) -> None:
        """``reach_timeout_ms``: how long a caller that will wait longer than one request (the
        committer, its ``commitTimeoutMs``) waits to reach the cluster at all."""
        config = {
            "request_timeout_ms": request_timeout_ms,
            "max_in_flight_requests_per_connection": IN_FLIGHT_PER_BROKER,
            **kafka_python_config(client_config),
        }
        request_ms = int(config["request_timeout_ms"])
        # An unreachable cluster fails within the caller's wait, not kafka-python's 30 s: the
        # client config's request.timeout.ms when it has one (`txn --timeout` sets it), or
        # longer for a caller that retries its requests longer, so that a cluster which comes
        # back within that time (a restarting broker) is reached.
        reach_ms = max(request_ms, reach_timeout_ms)
        config["bootstrap_timeout_ms"] = reach_ms
        self._request_timeout_s = request_ms / 1000
        # The net client first: it starts no thread, so a cluster out of reach leaves nothing
        # running, and the admin's own bootstrap then finds the cluster it reached.
        self._net = KafkaNetClient(**config)
        try:
            self._net.check_version(timeout_ms=reach_ms)
            self._admin = KafkaAdminClient(**config)
        except BaseException as exc:
            self._net.close()
            if isinstance(exc, Errors.KafkaTimeoutError):
                raise _unreachable(config, request_ms, reach_ms) from exc
            raise

    @property
    def kafka_admin(self) -> KafkaAdminClient:
        """The kafka-python admin on the same connections, for group-offset calls
        (:mod:`connectors.kafka.sink.owners`)."""
        return self._admin

    def close(self) -> None:
        self._admin.close()
        self._net.close()

    def __enter__(self) -> TransactionAdmin:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def describe(
        self, transactional_ids: Iterable[str], *, deadline: Deadline | None = None
    ) -> dict[str, TxnDescription | None]:
        """Current state per transactional id; None for an id the coordinator does not know.

        One DescribeTransactions per coordinator, all at once, within ``deadline`` (the
        request timeout by default); :class:`~checkpoint.errors.DeadlineExceeded` if
        coordinators stay unreachable that long.
        """
        ids = list(dict.fromkeys(transactional_ids))
        deadline = deadline or Deadline(self._request_timeout_s)
        answers = call_coordinators(self._net, ids, _DescribeCall(), deadline=deadline)
        result: dict[str, TxnDescription | None] = {}
        for tid in ids:
            answer = answers[tid]
            if answer.timed_out:
                raise DeadlineExceeded(
                    f"DescribeTransactions of {tid} did not finish within {deadline.timeout} s; "
                    f"last error: {answer.error.__name__}: {answer.detail}. Raise the timeout "
                    "or check the broker"
                )
            if answer.error is Errors.TransactionalIdNotFoundError:
                result[tid] = None
            elif answer.error is not Errors.NoError:
                raise answer.error(
                    f"DescribeTransactions of {tid}: coordinator {answer.coordinator_id} "
                    f"answered {answer.error.__name__}"
                )
            else:
                raw = answer.value
                result[tid] = TxnDescription(
                    transactional_id=tid,
                    state=TxnState(raw.transaction_state),
                    producer_id=raw.producer_id,
                    epoch=raw.producer_epoch,
                    coordinator_id=answer.coordinator_id,
                    timeout_ms=raw.transaction_timeout_ms,
                    start_time_ms=raw.transaction_start_time_ms,
                    partitions=tuple(
                        sorted((t.topic, p) for t in raw.topics for p in t.partitions)
                    ),
                )
        return result

    def list_transactional_ids(self, prefix: str, *, ongoing_only: bool = True) -> list[str]:
        """Transactional ids starting with ``prefix``, from every broker's coordinator.

        Retried until the request timeout while a broker is loading a partition of the
        transaction log or restarting (a rolling upgrade): the answer is then incomplete, and
        the sweep that lists must not fail the batch for it.
        """
        states = [TxnState.ONGOING.value] if ongoing_only else None
        listings = call_with_retries(
            lambda: self._admin.list_transactions(state_filters=states),
            deadline=Deadline(self._request_timeout_s),
            action="ListTransactions",
            is_retriable=lambda exc: isinstance(exc, RETRIABLE_END_TXN_ERRORS),
        )
        return sorted(
            {
                t.transactional_id
                for per_broker in listings.values()
                for t in per_broker
                if t.transactional_id.startswith(prefix)
            }
        )

    def end_transactions(
        self, targets: Sequence[EndTxnTarget], *, commit: bool, deadline: Deadline
    ) -> dict[str, EndTxnOutcome]:
        """End every target's transaction, EndTxn to all their coordinators at once.

        Retriable answers (:data:`RETRIABLE_END_TXN_ERRORS`; a coordinator that moved or is
        unreachable is looked up again) are retried with backoff until ``deadline``, after the
        ids that never failed, so an unreachable coordinator never holds back ids whose
        coordinators answer. Every id comes back ENDED, REFUSED with the coordinator's answer
        (a describe tells "ended before" from "lost"), or TIMED_OUT. Raises only what no retry
        mends on the client's side (a failed login, a broker older than Kafka 3.0).
        """
        by_id = _one_per_id(targets)
        answers = call_coordinators(
            self._net, list(by_id), EndTxnCall(by_id, commit), deadline=deadline
        )
        return {tid: EndTxnOutcome.of(by_id[tid], commit, a) for tid, a in answers.items()}

    def fence_transactions(
        self, targets: Sequence[EndTxnTarget], *, deadline: Deadline
    ) -> dict[str, FenceOutcome]:
        """Fence every target's producer (:mod:`connectors.kafka.fence`): InitProducerId at its
        producer id and epoch, sent only while a describe shows that epoch current, all ids at
        once, until each is fenced or ``deadline``. This is how the sink and its commands abort
        another process's transaction: an EndTxn(abort) at the producer's own epoch leaves the
        producer free to write on under transactions V1."""
        _one_per_id(targets)

        def describe(ids: list[str], bound: Deadline) -> dict[str, TxnDescription | None]:
            return self.describe(ids, deadline=bound)

        def send_init(
            sent: Mapping[str, EndTxnTarget], timeouts: Mapping[str, int], bound: Deadline
        ) -> dict[str, CoordinatorAnswer]:
            call = InitProducerIdCall(sent, timeouts)
            return call_coordinators(self._net, list(sent), call, deadline=bound)

        return fence_all(targets, describe, send_init, deadline)

    def epoch_bumps_on_end_at(
        self, coordinator_id: int, *, deadline: Deadline | None = None
    ) -> bool:
        """Whether an EndTxn at this coordinator may move the epoch on: it speaks EndTxn v5
        (transactions V2) and has finalized ``transaction.version`` 2, so it is sent v5
        (:func:`~connectors.kafka.txn_coordinators.usable_versions`). Asked of that broker itself
        (ApiVersions), because brokers of a cluster in a rolling upgrade speak different
        versions; :meth:`end_transactions` sends each coordinator the EndTxn version this
        answers for. A 4.x cluster at level 0 (upgraded from 3.x without finalizing it) would
        refuse v5 and wedge the transaction; levels 0 and 1 get v4, which keeps the epoch."""
        versions = broker_max_versions(
            self._net, coordinator_id, deadline or Deadline(self._request_timeout_s)
        )
        return end_txn_version(versions) >= EPOCH_BUMP_END_TXN_VERSION

    def write_commit_marker(
        self,
        tp: TopicPartition,
        producer_id: int,
        marker_epoch: int,
        coordinator_epoch: int,
        *,
        deadline: Deadline | None = None,
    ) -> None:
        """Write a COMMIT marker for a transaction its coordinator committed under transactions
        V2 to one partition, as the coordinator itself writes it: WriteTxnMarkers v2 to the
        partition's leader, at the epoch the commit moved to, marked transaction version 2 so
        that the leader refuses it once a later transaction of the producer is open there (a
        legacy marker is taken at any epoch not below the producer's). For the markers a Kafka
        4.x coordinator skips (KAFKA-20734). One attempt, never re-sent: between two attempts
        the partition may have moved on, and the caller looks at it again first. kafka-python's
        admin writes only ABORT markers, and only legacy ones."""
        self._write_marker(tp, producer_id, marker_epoch, coordinator_epoch, True, 2, deadline)

    def write_abort_marker(
        self,
        tp: TopicPartition,
        producer_id: int,
        marker_epoch: int,
        coordinator_epoch: int,
        *,
        guarded: bool,
        deadline: Deadline | None = None,
    ) -> None:
        """Write the ABORT marker a coordinator skipped (KAFKA-20734) to one partition, as it
        writes it: at the epoch its abort ended the transaction at, marked transaction version
        2 when ``guarded`` (the abort moved the epoch on, transactions V2), else a legacy marker.
        One attempt, as :meth:`write_commit_marker`."""
        self._write_marker(
            tp, producer_id, marker_epoch, coordinator_epoch, False, 2 if guarded else 0, deadline
        )

    def _write_marker(
        self,
        tp: TopicPartition,
        producer_id: int,
        marker_epoch: int,
        coordinator_epoch: int,
        commit: bool,
        transaction_version: int,
        deadline: Deadline | None,
    ) -> None:
        deadline = deadline or Deadline(self._request_timeout_s)
        where = f"{tp.topic}-{tp.partition}"
        kind = "COMMIT" if commit else "ABORT"
        leader = self._leader_of(tp)
        # Briefly: a leader this client does not know (it restarted after the client read the
        # cluster) stays unknown however long it is asked; the caller looks again anew.
        versions = broker_max_versions(self._net, leader, Deadline(deadline.bound(_VERSIONS_S)))
        if versions.get(WriteTxnMarkersRequest.API_KEY, -1) < 2:
            raise Errors.UnsupportedVersionError(
                f"broker {leader}, the leader of {where}, does not take WriteTxnMarkers v2 "
                "(KIP-1228), whose transaction version lets it refuse a marker that comes late"
            )
        marker = WriteTxnMarkersRequest.WritableTxnMarker(
            producer_id=producer_id,
            producer_epoch=marker_epoch,
            transaction_result=commit,
            topics=[
                WriteTxnMarkersRequest.WritableTxnMarker.WritableTxnMarkerTopic(
                    name=tp.topic, partition_indexes=[tp.partition]
                )
            ],
            coordinator_epoch=coordinator_epoch,
            transaction_version=transaction_version,
        )
        response = answer_of(
            self._net,
            leader,
            WriteTxnMarkersRequest(markers=[marker]),
            deadline,
            silence=f"no WriteTxnMarkers answer from broker {leader} within {deadline.timeout} s: "
            f"whether the {kind} marker reached {where} is unknown; look again",
        )
        answered = [
            Errors.for_code(partition.error_code)
            for result in response.markers
            if result.producer_id == producer_id
            for t in result.topics
            if t.name == tp.topic
            for partition in t.partitions
            if partition.partition_index == tp.partition
        ]
        if answered != [Errors.NoError]:
            error = next((e for e in answered if e is not Errors.NoError), Errors.UnknownError)
            raise error(f"WriteTxnMarkers ({kind.lower()}) of {where}: answered {answered}")

    def first_batch_at(
        self, tp: TopicPartition, offset: int, *, deadline: Deadline | None = None
    ) -> BatchHeader | None:
        """The header of the record batch that holds ``offset`` on ``tp`` (a Fetch,
        read_uncommitted, from the partition's leader), or None when the log no longer holds
        ``offset`` (deleted by retention; OFFSET_OUT_OF_RANGE). Whose records open a transaction's
        range on a partition is what DescribeProducers does not say."""
        deadline = deadline or Deadline(self._request_timeout_s)
        leader = self._leader_of(tp)
        fetched = FetchRequest.FetchTopic.FetchPartition(
            partition=tp.partition,
            fetch_offset=offset,
            log_start_offset=-1,
            partition_max_bytes=_FIRST_BATCH_BYTES,
            current_leader_epoch=-1,
        )
        request = FetchRequest(
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=0,
            max_bytes=_FIRST_BATCH_BYTES,
            isolation_level=0,  # read_uncommitted: the open range is what is looked at
            session_id=0,
            session_epoch=-1,
            topics=[FetchRequest.FetchTopic(topic=tp.topic, partitions=[fetched])],
            forgotten_topics_data=[],
            rack_id="",
            # v4 and later carry transactional batches whole; from v13 topics go by id.
            min_version=4,
            max_version=12,
        )
        response = answer_of(
            self._net, leader, request, deadline, silence=f"no Fetch answer from broker {leader}"
        )
        answer = next(
            (
                p
                for t in response.responses
                if t.topic == tp.topic
                for p in t.partitions
                if p.partition_index == tp.partition
            ),
            None,
        )
        if answer is None:
            raise NoBatchYet(f"the Fetch answer of broker {leader} lacks {tp}")
        error = Errors.for_code(answer.error_code)
        if error is Errors.OffsetOutOfRangeError:
            return None
        if error is not Errors.NoError:
            raise error(f"Fetch of {tp.topic}-{tp.partition} at {offset}: answered {error}")
        batch = MemoryRecords(answer.records or b"").next_batch()
        if batch is None:
            # Within the log but nothing sent (a throttled or empty answer): ask again later.
            raise NoBatchYet(f"broker {leader} sent no record batch of {tp} at {offset}")
        return BatchHeader(
            batch.base_offset,
            batch.producer_id,
            batch.producer_epoch,
            batch.is_transactional,
            batch.is_control_batch,
        )

    def _leader_of(self, tp: TopicPartition) -> int:
        where = f"{tp.topic}-{tp.partition}"
        [topic] = self._admin.describe_topics([tp.topic])
        leader = next(
            (p["leader_id"] for p in topic["partitions"] if p["partition_index"] == tp.partition),
            -1,
        )
        if topic["error_code"] or leader < 0:
            raise Errors.LeaderNotAvailableError(f"{where} has no leader now: try again later")
        return int(leader)


class NoBatchYet(Errors.KafkaError):
    """A Fetch answered without the batch asked for (a throttled or empty answer): ask again."""

    retriable = True


def _one_per_id(targets: Sequence[EndTxnTarget]) -> dict[str, EndTxnTarget]:
    by_id = {t.transactional_id: t for t in targets}
    if len(by_id) < len(targets):
        counts = Counter(t.transactional_id for t in targets)
        twice = sorted(tid for tid, n in counts.items() if n > 1)
        raise ValueError(
            f"one request per transactional id in a batch, got several for {twice}: a "
            "transactional id holds one transaction at a time"
        )
    return by_id
