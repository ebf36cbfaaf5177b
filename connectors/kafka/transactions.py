"""Describe, list and end Kafka transactions that another process opened.

A Kafka transaction belongs to the producer that opened it, and no client library can resume
one (confluent-kafka cannot; Flink reaches into the Java client by reflection). The protocol
can: EndTxn names the transaction by transactional id, producer id and epoch, which is exactly
what a committable records. kafka-python provides the requests and the admin calls
(DescribeTransactions, ListTransactions, FindCoordinator), so nothing here hand-writes the
wire format.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import kafka.errors as Errors
from kafka.admin import KafkaAdminClient
from kafka.net.compat import KafkaNetClient
from kafka.protocol.producer.transaction import EndTxnRequest

from checkpoint.deadline import Deadline, call_with_retries
from connectors.kafka.client_config import kafka_python_config
from connectors.kafka.naming import named_for_prefix

# The transactional id's coordinator is gone or moved (a broker died, the transaction log's
# leadership changed): worth another try once the coordinator is looked up afresh.
COORDINATOR_MOVED_ERRORS: tuple[type[Exception], ...] = (
    Errors.CoordinatorNotAvailableError,
    Errors.NotCoordinatorError,
    Errors.NodeNotReadyError,
    Errors.KafkaConnectionError,
    Errors.KafkaTimeoutError,
    Errors.RequestTimedOutError,
)
# Worth another try before the deadline: the coordinator moved, is loading, or is still
# completing a previous EndTxn of the same transactional id.
RETRIABLE_END_TXN_ERRORS: tuple[type[Exception], ...] = (
    Errors.ConcurrentTransactionsError,
    Errors.CoordinatorLoadInProgressError,
    *COORDINATOR_MOVED_ERRORS,
)
# The transaction is no longer the one the caller named: ended, or fenced by a newer epoch.
# Only a describe can tell "already committed" from "lost".
ENDED_OR_FENCED_ERRORS: tuple[type[Exception], ...] = (
    Errors.InvalidProducerEpochError,
    Errors.ProducerFencedError,
    Errors.InvalidTxnStateError,
    Errors.InvalidProducerIdMappingError,
    Errors.TransactionalIdNotFoundError,
)


class TxnState(StrEnum):
    """The coordinator's state of a transactional id (DescribeTransactions wire values)."""

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    DEAD = "Dead"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"
    UNKNOWN = "Unknown"


@dataclass(frozen=True)
class TxnDescription:
    transactional_id: str
    state: TxnState
    producer_id: int
    epoch: int
    coordinator_id: int
    timeout_ms: int
    start_time_ms: int
    partitions: tuple[tuple[str, int], ...]

    def is_commit_of(self, producer_id: int, epoch: int, *, epoch_bumped: bool) -> bool:
        """Whether the transaction (producer_id, epoch) is committed or committing.

        Transactions V2 (EndTxn v5+, Kafka 4.x) bump the epoch when a transaction ends, so the
        committed transaction of epoch E shows as exactly E + 1; V1 keeps exactly E. Accepting
        both would take the next transaction's commit (E + 1 under V1) for this one's.
        """
        return (
            self.state in (TxnState.COMPLETE_COMMIT, TxnState.PREPARE_COMMIT)
            and self.producer_id == producer_id
            and self.epoch == (epoch + 1 if epoch_bumped else epoch)
        )


class TransactionAdmin:
    """Admin connections to one cluster, for the driver, the CLI and the writer's describe."""

    def __init__(self, client_config: Mapping[str, Any], request_timeout_ms: int = 30_000) -> None:
        config = {
            "request_timeout_ms": request_timeout_ms,
            # An unreachable cluster fails within the caller's timeout, not kafka-python's 30 s.
            "bootstrap_timeout_ms": request_timeout_ms,
            **kafka_python_config(client_config),
        }
        self._request_timeout_ms = int(config["request_timeout_ms"])
        self._config = config
        self._admin = KafkaAdminClient(**config)
        self._net = KafkaNetClient(**config)
        self._net.check_version(timeout_ms=self._request_timeout_ms)
        # EndTxn v5 is transactions V2: every EndTxn moves the epoch on.
        self.epoch_bumps_on_end = self._net.api_version(EndTxnRequest, max_version=5) >= 5

    def close(self) -> None:
        self._admin.close()
        self._net.close()

    def _forget_coordinators(self) -> None:
        """kafka-python caches each id's coordinator and never drops a dead one: only a new
        admin client asks FindCoordinator again, and so finds where the role moved."""
        self._admin.close()
        self._admin = KafkaAdminClient(**self._config)

    def __enter__(self) -> TransactionAdmin:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def describe(self, transactional_ids: Iterable[str]) -> dict[str, TxnDescription | None]:
        """Current state per transactional id; None for an id the coordinator does not know."""
        result: dict[str, TxnDescription | None] = {}
        for tid in transactional_ids:
            try:
                raw = self._admin.describe_transactions([tid])[tid]
            except Errors.TransactionalIdNotFoundError:
                result[tid] = None
                continue
            result[tid] = TxnDescription(
                transactional_id=tid,
                state=TxnState(raw.state.value),
                producer_id=raw.producer_id,
                epoch=raw.producer_epoch,
                coordinator_id=raw.coordinator_id,
                timeout_ms=raw.transaction_timeout_ms,
                start_time_ms=raw.transaction_start_time_ms,
                partitions=tuple(sorted((tp.topic, tp.partition) for tp in raw.topic_partitions)),
            )
        return result

    def list_transactional_ids(self, prefix: str, *, ongoing_only: bool = True) -> list[str]:
        """Transactional ids starting with ``prefix``, from every broker's coordinator."""
        states = [TxnState.ONGOING.value] if ongoing_only else None
        listings = self._admin.list_transactions(state_filters=states)
        return sorted(
            {
                t.transactional_id
                for per_broker in listings.values()
                for t in per_broker
                if t.transactional_id.startswith(prefix)
            }
        )

    def end_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        *,
        commit: bool,
        deadline: Deadline,
    ) -> type[Exception] | None:
        """Send EndTxn, retrying retriable answers until ``deadline``.

        Returns None on success, or the non-retriable error class the coordinator answered
        with; raises :class:`~checkpoint.errors.DeadlineExceeded` when retriable errors
        outlast the deadline.
        """

        def attempt() -> type[Exception] | None:
            try:
                return send()
            except COORDINATOR_MOVED_ERRORS:
                self._forget_coordinators()
                raise

        def send() -> type[Exception] | None:
            described = self.describe([transactional_id])[transactional_id]
            coordinator = described.coordinator_id if described else self._net.least_loaded_node()
            response = self._net.send_and_receive(
                coordinator,
                EndTxnRequest(
                    transactional_id=transactional_id,
                    producer_id=producer_id,
                    producer_epoch=epoch,
                    committed=commit,
                ),
                timeout_ms=max(1, int(deadline.bound(self._request_timeout_ms / 1000) * 1000)),
            )
            error = Errors.for_code(response.error_code)
            if issubclass(error, RETRIABLE_END_TXN_ERRORS):
                raise error()
            return None if error is Errors.NoError else error

        return call_with_retries(
            attempt,
            deadline=deadline,
            action=(
                f"EndTxn({'commit' if commit else 'abort'}) of {transactional_id} "
                f"(producer id {producer_id}, epoch {epoch})"
            ),
            is_retriable=lambda exc: isinstance(exc, RETRIABLE_END_TXN_ERRORS),
        )


def open_transactions(
    admin: TransactionAdmin, prefix: str | None = None, *, all_states: bool = False
) -> list[TxnDescription]:
    """Transactions of every coordinator, sorted by id: Ongoing ones unless ``all_states``.

    With ``prefix``, only the ids a sink with that ``transactionalIdPrefix`` names, for any
    query (:func:`~connectors.kafka.naming.named_for_prefix`), not those of a longer prefix
    such as ``<prefix>-x``.
    """
    ids = admin.list_transactional_ids(prefix or "", ongoing_only=not all_states)
    if prefix is not None:
        ids = [tid for tid in ids if named_for_prefix(prefix, tid)]
    described = admin.describe(ids).values()
    # The listing and the describe are two requests: a transaction may end in between.
    return [d for d in described if d is not None and (all_states or d.state == TxnState.ONGOING)]
