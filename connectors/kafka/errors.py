"""Errors of the Kafka sink that mean the exactly-once guarantee could not hold.

They say what happened, to which batch and transaction, why it usually happens, and the fix.
"""

from __future__ import annotations

from checkpoint.errors import KafkaEosError

_TIMEOUT_FIX = (
    "Raise the producer's transaction.timeout.ms (option kafka.transaction.timeout.ms, at most "
    "the broker's transaction.max.timeout.ms) above trigger interval + batch duration + "
    "restart time, and check that no other job uses the same transactionalIdPrefix "
    "(`kafka-eos lint` and `kafka-eos txn list` help)."
)


class PreCommitLostError(KafkaEosError):
    """A pre-committed transaction ended before the batch's decision: nothing was decided, so
    replaying the batch loses nothing."""

    def __init__(self, batch_id: int, transactional_id: str, detail: str) -> None:
        self.batch_id = batch_id
        self.transactional_id = transactional_id
        super().__init__(
            f"batch {batch_id}: pre-committed transaction {transactional_id} is gone before the "
            f"commit decision ({detail}). Usually the broker aborted it because "
            "transaction.timeout.ms expired between the task's pre-commit and the driver's "
            "commit. No decision was written and nothing of the batch is visible: restart the "
            f"query and Spark replays batch {batch_id}. {_TIMEOUT_FIX}"
        )


class TransactionLostError(KafkaEosError):
    """A decided batch has a transaction that can no longer be committed: its records are lost
    to read_committed readers. This must never pass silently."""

    def __init__(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        detail: str,
        batch_id: int | None = None,
        failed: tuple[str, ...] = (),
    ) -> None:
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.epoch = epoch
        self.detail = detail
        self.batch_id = batch_id
        self.failed = failed or (transactional_id,)
        batch = "a decided batch" if batch_id is None else f"decided batch {batch_id}"
        others = (
            f" Transactions of the batch that did not commit: {', '.join(self.failed)}."
            if len(self.failed) > 1
            else ""
        )
        super().__init__(
            f"transaction {transactional_id} (producer id {producer_id}, epoch {epoch}) of "
            f"{batch} can no longer be committed: {detail}.{others} Its records will never be "
            "visible to read_committed readers, while the rest of the batch is. The input of "
            "this batch must be re-processed (for example by resetting the query's checkpoint "
            f"to before the batch) to recover them. {_TIMEOUT_FIX}"
        )

    def in_batch(self, batch_id: int, failed: tuple[str, ...] = ()) -> TransactionLostError:
        """The same error, naming the batch and every transaction of it that did not commit
        (the committer itself knows neither)."""
        return TransactionLostError(
            self.transactional_id, self.producer_id, self.epoch, self.detail, batch_id, failed
        )
