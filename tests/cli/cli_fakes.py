"""Fakes for the ``txn`` unit tests: a coordinator's view of transactions, kept in memory,
behind the admin and committer interfaces the commands use. No broker."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

import kafka.errors as Errors

from checkpoint.deadline import Deadline
from checkpoint.model import Committable
from connectors.kafka.end_txn import EndTxnOutcome, EndTxnTarget
from connectors.kafka.sink.errors import TransactionLostError
from connectors.kafka.txn_coordinators import CoordinatorAnswer
from connectors.kafka.txn_state import TxnDescription, TxnState

NOW_MS = 1_700_000_000_000


def ongoing(
    tid: str, producer_id: int = 7, epoch: int = 3, age_s: int = 90, now_ms: int = NOW_MS
) -> TxnDescription:
    return TxnDescription(
        transactional_id=tid,
        state=TxnState.ONGOING,
        producer_id=producer_id,
        epoch=epoch,
        coordinator_id=1,
        timeout_ms=60_000,
        start_time_ms=now_ms - age_s * 1000,
        partitions=(("out", 0), ("out", 1)),
    )


class FakeAdmin:
    """The coordinators' transactions; an abort moves one to CompleteAbort (epoch + 1), a
    commit to CompleteCommit (epoch + 1 with ``epoch_bumps_on_end``, transactions V2)."""

    def __init__(
        self, transactions: Iterable[TxnDescription] = (), epoch_bumps_on_end: bool = False
    ) -> None:
        self.transactions = {t.transactional_id: t for t in transactions}
        self.epoch_bumps_on_end = epoch_bumps_on_end
        self.hidden_commits: set[str] = set()
        self.unanswered: set[str] = set()  # EndTxn times out

    def list_transactional_ids(self, prefix: str, *, ongoing_only: bool = True) -> list[str]:
        return sorted(
            tid
            for tid, t in self.transactions.items()
            if tid.startswith(prefix) and (t.state == TxnState.ONGOING or not ongoing_only)
        )

    def describe(self, transactional_ids: Iterable[str]) -> dict[str, TxnDescription | None]:
        return {tid: self.transactions.get(tid) for tid in transactional_ids}

    def epoch_bumps_on_end_at(self, coordinator_id: int) -> bool:
        return self.epoch_bumps_on_end

    def end_transactions(
        self, targets: Sequence[EndTxnTarget], *, commit: bool, deadline: Deadline
    ) -> dict[str, EndTxnOutcome]:
        """As a coordinator: a commit it already made (``hidden_commits``, which a describe
        cannot show after a V2 epoch overflow) is answered with success, anything that is not
        the open transaction is fenced. Only the resolve command's retry sends these."""
        outcomes = {}
        for t in targets:
            if t.transactional_id in self.unanswered:
                answer = CoordinatorAnswer(Errors.RequestTimedOutError, timed_out=True)
            else:
                hidden = t.transactional_id in self.hidden_commits
                error = Errors.NoError if hidden else Errors.InvalidProducerEpochError
                answer = CoordinatorAnswer(error, coordinator_id=1, attempts=1)
            outcomes[t.transactional_id] = EndTxnOutcome.of(t, commit, answer)
        return outcomes


class FakeCommitter:
    """Stands in for KafkaCommitter: records aborts and commits; ``fail`` maps ids to an
    error to raise."""

    def __init__(self, admin: FakeAdmin, fail: dict[str, Exception] | None = None) -> None:
        self.admin = admin
        self.timeout_s = 30.0
        self.fail = fail or {}
        self.aborted: list[Committable] = []
        self.committed: list[Committable] = []
        self.closed = False

    def commit(self, committable: Committable) -> None:
        """As KafkaCommitter: only the Ongoing transaction the committable names commits."""
        if committable.transactional_id in self.fail:
            raise self.fail[committable.transactional_id]
        tid, now = (
            committable.transactional_id,
            self.admin.transactions.get(committable.transactional_id),
        )
        if now is None or (now.state, now.producer_id, now.epoch) != (
            TxnState.ONGOING,
            committable.producer_id,
            committable.epoch,
        ):
            raise TransactionLostError(
                tid, committable.producer_id, committable.epoch, f"now {now}"
            )
        self.committed.append(committable)
        bump = 1 if self.admin.epoch_bumps_on_end else 0
        self.admin.transactions[tid] = replace(
            now, state=TxnState.COMPLETE_COMMIT, epoch=now.epoch + bump, start_time_ms=-1
        )

    def abort(self, committable: Committable) -> None:
        if committable.transactional_id in self.fail:
            raise self.fail[committable.transactional_id]
        self.aborted.append(committable)
        now = self.admin.transactions[committable.transactional_id]
        self.admin.transactions[committable.transactional_id] = replace(
            now, state=TxnState.COMPLETE_ABORT, epoch=now.epoch + 1, start_time_ms=-1
        )

    def close(self) -> None:
        self.closed = True
