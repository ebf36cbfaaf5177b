"""The errors that mean the guarantee could not hold: each must name the batch, the
transactions, the cause and the fix, because a driver log is all an operator has."""

from __future__ import annotations

import pickle

from checkpoint.errors import KafkaEosError
from connectors.kafka.sink.errors import (
    CommitUndeterminedError,
    DecidedTransactionError,
    PreCommitLostError,
    PrefixConflictError,
    TransactionLostError,
)
from connectors.kafka.sink.owners import Registration

FIX = "kafka.transaction.timeout.ms"


def test_pre_commit_lost_names_the_batch_the_transaction_the_cause_and_the_fix() -> None:
    error = PreCommitLostError(7, "orders-enricher-3", "found CompleteAbort with epoch 5")
    message = str(error)
    assert message.startswith(
        "[KAFKA_EOS.SINK.PRE_COMMIT_LOST] batch 7: pre-committed transaction orders-enricher-3"
    )
    assert "(found CompleteAbort with epoch 5)" in message
    assert "transaction.timeout.ms expired, or nearly" in message  # the usual cause
    assert "No decision was written and nothing of the batch is visible" in message
    assert "Spark replays batch 7" in message  # what happens next
    assert FIX in message and "transactionalIdPrefix" in message  # the fixes
    assert (error.batch_id, error.transactional_id) == (7, "orders-enricher-3")
    assert isinstance(error, KafkaEosError)


def test_transaction_lost_without_a_batch_names_the_transaction_and_the_loss() -> None:
    error = TransactionLostError("q-0", 4001, 7, "EndTxn(commit) answered ProducerFencedError")
    message = str(error)
    assert message.startswith(
        "[KAFKA_EOS.SINK.TRANSACTION_LOST] transaction q-0 (producer id 4001, epoch 7) of a decided"
    )
    assert "was aborted before its commit: EndTxn(commit) answered ProducerFencedError." in message
    assert "never be visible to read_committed readers" in message
    assert "re-process their input outside this query" in message  # to recover the records
    assert "kafka-eos txn resolve" in message and "--accept-loss" in message
    assert "Do not reset the query's checkpoint" in message
    assert FIX in message
    assert "Transactions of the batch not confirmed" not in message  # only one
    assert error.failed == ("q-0",)
    assert isinstance(error, DecidedTransactionError)


def test_an_undetermined_commit_says_the_records_may_be_visible_and_never_to_reprocess() -> None:
    """The coordinator no longer shows the transaction: calling it lost would have the
    operator re-process a batch that may well have committed (duplicates)."""
    error = CommitUndeterminedError("q-0", 4001, 7, "the id is now Empty at epoch 9").in_batch(4)
    message = str(error)
    assert message.startswith("[KAFKA_EOS.SINK.COMMIT_UNDETERMINED] transaction q-0")
    assert "of decided batch 4 cannot be shown to have committed or aborted" in message
    assert "Its records may be visible" in message
    assert "never be visible" not in message
    assert "kafka-eos verify" in message and "never the whole batch" in message
    assert "--batch 4" in message
    assert isinstance(error, DecidedTransactionError)
    assert not isinstance(error, TransactionLostError)


def test_in_batch_names_the_batch_and_every_failed_transaction() -> None:
    original = TransactionLostError("q-0", 4001, 7, "the transaction is now CompleteAbort")
    error = original.in_batch(12, ("q-0", "q-1", "q-5"))
    message = str(error)
    assert "of decided batch 12 was aborted before its commit" in message
    assert "the transaction is now CompleteAbort" in message
    assert "not confirmed as committed: q-0, q-1, q-5." in message
    assert (error.transactional_id, error.producer_id, error.epoch) == ("q-0", 4001, 7)
    assert (error.batch_id, error.failed) == (12, ("q-0", "q-1", "q-5"))
    assert original.batch_id is None  # a new error; the committer's stays as it was


def test_in_batch_without_failed_ids_keeps_the_single_transaction() -> None:
    error = TransactionLostError("q-2", 1, 0, "gone").in_batch(3)
    assert error.failed == ("q-2",)
    assert "decided batch 3" in str(error)


def test_errors_survive_pickling_with_their_fields() -> None:
    """Spark ships errors between processes; a lost field would hide the batch or the ids."""
    for error in (
        PreCommitLostError(7, "q-3", "detail"),
        TransactionLostError("q-0", 4001, 7, "gone").in_batch(12, ("q-0", "q-1")),
        CommitUndeterminedError("q-0", 4001, 7, "moved on").in_batch(12),
    ):
        copy = pickle.loads(pickle.dumps(error))
        assert type(copy) is type(error)
        assert str(copy) == str(error)
        assert copy.__dict__ == error.__dict__


def test_a_prefix_conflict_names_both_locations_and_an_abort_that_keeps_decided_batches() -> None:
    other = Registration("s3a://bucket/checkpoints/orders-v1", 1_000)
    error = PrefixConflictError(
        "orders", "s3a://bucket/checkpoints/orders-v2", "0a1b2c3d",
        {"4e5f6a7b": (other, ["orders-4e5f6a7b-0-0"])}, now_ms=181_000,
    )  # fmt: skip
    message = str(error)
    assert (
        "Other query: owner 4e5f6a7b (checkpoint 's3a://bucket/checkpoints/orders-v1', "
        "registered 3 min ago): orders-4e5f6a7b-0-0" in message
    )
    assert "This query: checkpoint 's3a://bucket/checkpoints/orders-v2', owner 0a1b2c3d" in message
    # The abort reads the other query's decisions, so a batch it decided is never dropped.
    assert (
        "--transactional-id orders-4e5f6a7b-0-0 --checkpoint-location "
        "'s3a://bucket/checkpoints/orders-v1'" in message
    )
    assert "--prefix" not in message  # it would end this query's transactions too


def test_a_reset_query_is_told_the_old_decisions_are_gone_not_to_read_them() -> None:
    """The old query's registered location is this query's own, spelled another way: an
    abort reading the decisions there would read the new query's, so do not advise it."""
    other = Registration("file:/chk/orders", 1_000)
    error = PrefixConflictError(
        "kafka-eos-orders-0123456789ab", "/chk/orders/", "0a1b2c3d",
        {"4e5f6a7b": (other, ["kafka-eos-orders-0123456789ab-4e5f6a7b-0-0"])}, now_ms=181_000,
        prefix_derived=True,
    )  # fmt: skip
    message = str(error)
    assert "--checkpoint-location" not in message
    assert "--transactional-id kafka-eos-orders-0123456789ab-4e5f6a7b-0-0 --yes" in message
    assert "its decisions with it" in message and "lost either way" in message
