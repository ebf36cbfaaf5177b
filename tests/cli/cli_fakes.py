"""Fakes for the ``txn`` unit tests: a coordinator's view of transactions, kept in memory,
behind the admin and committer interfaces the commands use. No broker."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from checkpoint.model import Committable
from connectors.kafka.errors import TransactionLostError
from connectors.kafka.transactions import TxnDescription, TxnState

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

    def list_transactional_ids(self, prefix: str, *, ongoing_only: bool = True) -> list[str]:
        return sorted(
            tid
            for tid, t in self.transactions.items()
            if tid.startswith(prefix) and (t.state == TxnState.ONGOING or not ongoing_only)
        )

    def describe(self, transactional_ids: Iterable[str]) -> dict[str, TxnDescription | None]:
        return {tid: self.transactions.get(tid) for tid in transactional_ids}


class FakeCommitter:
    """Stands in for KafkaCommitter: records aborts and commits; ``fail`` maps ids to an
    error to raise."""

    def __init__(self, admin: FakeAdmin, fail: dict[str, Exception] | None = None) -> None:
        self.admin = admin
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
