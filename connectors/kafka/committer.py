"""The committer: ends the transactions that tasks pre-committed, from the driver.

It implements :class:`checkpoint.participant.Committer`, so the checkpoint coordinator drives
it: commit on notify-complete (after the decision is durable), abort on the abort
notification, and abort of lingering transactions on recovery. Failures are sorted as Flink's
``KafkaCommitter`` sorts them: retriable (retried until the deadline), ended-or-fenced
(resolved by describing the transaction: already committed is success, anything else is a
loss and fails loudly), unknown (raised).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from checkpoint.crashpoints import crash_point
from checkpoint.deadline import Deadline
from checkpoint.model import Committable
from connectors.kafka.errors import PreCommitLostError, TransactionLostError
from connectors.kafka.transactions import (
    ENDED_OR_FENCED_ERRORS,
    TransactionAdmin,
    TxnState,
    open_transactions,
)

_log = logging.getLogger(__name__)


class KafkaCommitter:
    """Commits and aborts the transactions of one transactional-id prefix."""

    def __init__(
        self, client_config: Mapping[str, Any], prefix: str, timeout_s: float = 60.0
    ) -> None:
        self._client_config = dict(client_config)
        self._prefix = prefix
        self._timeout_s = timeout_s
        self._admin: TransactionAdmin | None = None

    @property
    def admin(self) -> TransactionAdmin:
        if self._admin is None:
            self._admin = TransactionAdmin(self._client_config)
        return self._admin

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None

    def verify_pre_committed(self, batch_id: int, committables: Sequence[Committable]) -> None:
        """Before the decision: every transaction must still be the open one its task left.

        A transaction the broker already aborted (timeout) must stop the batch *before* it is
        decided; deciding it would turn a harmless replay into data loss.
        """
        wrote = [c for c in committables if c.producer_id >= 0]
        described = self.admin.describe(c.transactional_id for c in wrote)
        for c in wrote:
            now = described[c.transactional_id]
            if now is None:
                raise PreCommitLostError(batch_id, c.transactional_id, "the id is unknown")
            if (now.state, now.producer_id, now.epoch) != (
                TxnState.ONGOING,
                c.producer_id,
                c.epoch,
            ):
                raise PreCommitLostError(
                    batch_id,
                    c.transactional_id,
                    f"expected Ongoing with producer id {c.producer_id} and epoch {c.epoch}, "
                    f"found {now.state.value} with producer id {now.producer_id} and epoch "
                    f"{now.epoch}",
                )

    def commit(self, committable: Committable) -> None:
        if committable.producer_id < 0:
            return  # the task wrote nothing and opened no transaction
        crash_point("driver.before_end_txn")
        error = self.admin.end_transaction(
            committable.transactional_id,
            committable.producer_id,
            committable.epoch,
            commit=True,
            deadline=Deadline(self._timeout_s),
        )
        if error is None:
            return
        if not issubclass(error, ENDED_OR_FENCED_ERRORS):
            raise TransactionLostError(
                committable.transactional_id,
                committable.producer_id,
                committable.epoch,
                f"EndTxn(commit) answered {error.__name__}",
            )
        now = self.admin.describe([committable.transactional_id])[committable.transactional_id]
        if now is not None and now.is_commit_of(
            committable.producer_id, committable.epoch, epoch_bumped=self.admin.epoch_bumps_on_end
        ):
            return  # committed before (a re-driven commit after a crash): idempotent
        seen = (
            "unknown to its coordinator"
            if now is None
            else (f"now {now.state.value} with producer id {now.producer_id}, epoch {now.epoch}")
        )
        raise TransactionLostError(
            committable.transactional_id,
            committable.producer_id,
            committable.epoch,
            f"EndTxn(commit) answered {error.__name__}; the transaction is {seen}",
        )

    def abort(self, committable: Committable) -> None:
        """Abort a pre-committed transaction; one that already ended is left as it is."""
        if committable.producer_id < 0:
            return
        self._abort(committable.transactional_id, committable.producer_id, committable.epoch)

    def recover(self, decided: Sequence[Committable]) -> None:
        """Abort every open transaction of the prefix that is not part of a decision.

        These are lingering transactions: pre-committed by tasks of a batch that never got its
        decision, or left by attempts that died. Ids beyond today's task count (after a change
        of parallelism) are found too, because the listing goes by prefix.
        """
        keep = {c.key for c in decided}
        for now in open_transactions(self.admin, self._prefix):
            if (now.transactional_id, now.producer_id, now.epoch) in keep:
                continue
            tid = now.transactional_id
            _log.warning(
                "aborting lingering transaction %s (producer id %s, epoch %s) of "
                "transactionalIdPrefix %r: a crashed attempt left it, or another live query "
                "uses the same prefix (then the two fence each other: give each query its own)",
                tid, now.producer_id, now.epoch, self._prefix,
            )  # fmt: skip
            self._abort(tid, now.producer_id, now.epoch)

    def _abort(self, transactional_id: str, producer_id: int, epoch: int) -> None:
        error = self.admin.end_transaction(
            transactional_id, producer_id, epoch, commit=False, deadline=Deadline(self._timeout_s)
        )
        if error is not None and not issubclass(error, ENDED_OR_FENCED_ERRORS):
            raise error(f"EndTxn(abort) of {transactional_id} failed")
