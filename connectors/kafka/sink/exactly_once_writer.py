"""The exactly-once writer: produces a task's records in a transaction, and pre-commits on
the barrier. Producing and flushing are :class:`~connectors.kafka.sink.writer.BaseWriter`'s.

Runs in a Spark task on an executor. One Kafka transaction per task attempt per checkpoint
(micro-batch), on one of the task's transactional ids (:mod:`connectors.kafka.sink.naming`):

1. take the first of the task's ids that is free: unknown, Empty, or its last transaction
   ended (committed, or aborted by a fence or its timeout). An open one belongs to
   another attempt of this task (a speculative copy, a zombie), whose transaction the driver
   may already have verified or decided, and ``init_transactions`` on its id would abort it.
   The producer is built and connected first, and the id described right before its
   ``init_transactions``, so that the window in which another attempt can take the same id
   is a describe and two requests long;
2. ``init_transactions``, begin, then produce every record of the task's input; a task that
   holds its transaction so long that the driver could not commit it in time fails at once
   (:class:`TransactionTooLong`) instead of leaving the broker to abort it later;
3. on the barrier (the end of the input) ``pre_commit``: flush, then describe the transaction
   to learn its producer id, epoch and start time, and return them as the committable. No
   commit here: the driver commits once the whole batch succeeded. On an id that held a
   transaction before, first check that this transaction joined no range that an abort
   left open (:meth:`ExactlyOnceWriter._refuse_a_joined_range`).

An attempt that fails does not abort its transaction: it leaves it open, and so its id held,
for the driver, whose fence aborts it and then makes sure of its ABORT markers
(:func:`connectors.kafka.sink.marker_repair.settle_fenced`).

Step 1 is a describe, then an init: another attempt may take the same id in between. The
describe at step 3 alone cannot tell whose transaction it sees then: the id's open transaction
may be the other attempt's, half-written, and naming it in this attempt's committable would
let the driver commit it while this attempt's records are aborted: a silent loss. Nor can it
tell this producer's transaction from a later one at the same epoch: under transactions V1 a
transaction ended by anyone but a fence lets its producer begin another at the same epoch,
and the records written before are gone. So the described transaction must be this
producer's own (its id and epoch, which librdkafka reports in its statistics), must hold every
partition this producer wrote to (the statistics again), and must have begun no later than
this producer's first record was acknowledged: :func:`~connectors.kafka.txn_state.standing_of`
answers all three, as it does for the driver.

The producer is never closed: confluent-kafka's ``close()`` aborts the open transaction, which
would drop the pre-committed batch. Dropping the object, or the worker exiting, leaves the
transaction open for the driver (tested in ``integration_tests/sink``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import kafka.errors as Errors
import pyarrow as pa
from confluent_kafka import KafkaException, Producer
from kafka.structs import TopicPartition

from checkpoint.crashpoints import CrashPoint, crash_point
from checkpoint.deadline import Deadline, call_with_retries
from checkpoint.errors import DeadlineExceeded
from checkpoint.model import Committable
from connectors.kafka.client_pool import ClientPool
from connectors.kafka.partition_txns import BatchHeader, end_offsets, open_on_partitions
from connectors.kafka.sink.lifetime import (
    CLOCK_SKEW_TOLERANCE_MS,
    commit_margin_ms,
    transaction_timeout_ms,
)
from connectors.kafka.sink.writer import BaseWriter, DeliveryFailed, TransactionTooLong
from connectors.kafka.transactions import TransactionAdmin
from connectors.kafka.txn_state import Standing, TxnDescription, TxnState, standing_of

_log = logging.getLogger(__name__)
# How often librdkafka reports the producer's id, epoch and partitions; a pre-commit waits for
# one report made after its flush began, at most this long after the flush.
_STATS_INTERVAL_MS = 20
# A partition's statistics that count its records: transmitted, or still queued or in flight.
_SENT_COUNTS = ("txmsgs", "msgs", "msgq_cnt", "xmit_msgq_cnt", "msgs_inflight")
# Where the coordinator's describe says an id is free to take: nothing open on it, and any
# transaction it held ended by its own producer or by a fence (every abort of the sink is one).
_FREE = frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT})


def _retriable(exc: BaseException) -> bool:
    """A Kafka error worth another try: a leader that moved, a broker restarting, a partition
    without a leader for now (kafka-python then asks broker -1: UnknownBrokerIdError)."""
    return isinstance(exc, Errors.KafkaError) and (
        exc.retriable or isinstance(exc, Errors.UnknownBrokerIdError)
    )


class _ProducerStats:
    """What librdkafka's statistics say of this producer: the producer id and epoch it holds,
    whether a broker connection is up, when a record was first acknowledged (this process's
    clock), and, from the last report, the partitions it wrote to. A report is parsed only
    while one of the first three is unknown, and the last one once, at the pre-commit: a
    report names every partition of the topics, hundreds of kilobytes every 20 ms for a large
    topic."""

    def __init__(self) -> None:
        self.reports = 0
        self.producer_id_and_epoch: tuple[int, int] | None = None
        self.connected = False
        self.first_acked_ms: int | None = None
        self._last = "{}"

    def __call__(self, stats_json: str) -> None:
        self.reports += 1
        self._last = stats_json
        if self.producer_id_and_epoch is None or not self.connected or not self.first_acked_ms:
            self._read(json.loads(stats_json))

    def _read(self, stats: dict[str, Any]) -> None:
        eos = stats.get("eos") or {}
        if (
            self.producer_id_and_epoch is None
            and eos.get("idemp_state") == "Assigned"
            and eos.get("producer_id", -1) >= 0
        ):
            # Fixed from init_transactions until this producer ends its transaction.
            self.producer_id_and_epoch = (eos["producer_id"], eos["producer_epoch"])
        brokers = (stats.get("brokers") or {}).values()
        self.connected = self.connected or any(b.get("state") == "UP" for b in brokers)
        acked = any(p.get("acked_msgid", 0) > 0 for _, p in _partitions(stats))
        if acked and self.first_acked_ms is None:
            self.first_acked_ms = int(time.time() * 1000)

    def partitions(self) -> frozenset[tuple[str, int]]:
        """Every partition the producer wrote to, as the last report counts them (once the
        flush returned: sent and acknowledged)."""
        return frozenset(
            (topic, p["partition"])
            for topic, p in _partitions(json.loads(self._last))
            # Sent, or queued to be: librdkafka's "msgs" stays 0 for some of its paths.
            if p.get("partition", -1) >= 0 and any(p.get(n, 0) > 0 for n in _SENT_COUNTS)
        )


def _partitions(stats: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for topic, per_topic in (stats.get("topics") or {}).items():
        for partition in (per_topic.get("partitions") or {}).values():
            yield topic, partition


# This Python worker's transaction admins, kept from one task to the next (a failed task's
# is closed): the writer describes its transaction twice per task.
WORKER_ADMINS: ClientPool[TransactionAdmin] = ClientPool(TransactionAdmin.close)


class ExactlyOnceWriter(BaseWriter):
    """Exactly-once: the task's records in one transaction, pre-committed, never committed here."""

    aftermath = "Nothing of this batch is visible: its transactions are aborted, never committed."

    def __init__(
        self,
        producer_config: Mapping[str, Any],
        topic: str | None,
        transactional_ids: Sequence[str],
        timeout_s: float,
        *,
        commit_timeout_s: float = 60.0,
    ) -> None:
        super().__init__(producer_config, topic, timeout_s)
        if not transactional_ids:
            raise ValueError("a writer needs at least one transactional id to choose from")
        self._candidates = tuple(transactional_ids)
        self.transactional_id = self._candidates[0]  # the one taken, once the task has input
        self._stats = _ProducerStats()
        self._admin: TransactionAdmin | None = None
        self._clients = contextlib.ExitStack()
        timeout_ms = transaction_timeout_ms(self._config)
        self._age_limit_ms = timeout_ms - commit_margin_ms(timeout_ms, int(commit_timeout_s * 1000))
        self._timeout_ms = timeout_ms
        self._begun_at: float | None = None
        # The id as its coordinator showed it right before this attempt took it: None for an
        # id never used (its producer id is new, and holds no range anywhere).
        self._taken_from: TxnDescription | None = None
        # The end of each partition of a topic before this transaction's first record to it,
        # after init_transactions fenced the id's earlier epochs: a range of this producer
        # that begins at or after it can only be this transaction's (with partition
        # verification, KIP-890), and needs no look at its first batch.
        self._ends_at_take: dict[TopicPartition, int] = {}
        self._ends_read: set[str] = set()  # the topics whose ends were asked for

    def _open(self, topic: str) -> Producer:
        producer, self.transactional_id = self._producer_on_a_free_id(topic)
        # The id was free a moment ago (step 1), so this fences nothing that another attempt
        # still needs; a dead attempt's ended transaction is history.
        producer.init_transactions(self._timeout_s)
        producer.begin_transaction()
        self._begun_at = time.monotonic()
        return producer

    def _producer_for(self, topic: str) -> Producer:
        producer = super()._producer_for(topic)
        if self._taken_from is not None and topic not in self._ends_read:
            self._read_ends(topic)
        return producer

    def _read_ends(self, topic: str) -> None:
        """Where each partition of ``topic`` ends, before this transaction's first record to
        it and after ``init_transactions`` fenced the id's earlier epochs (see
        :meth:`_refuse_a_joined_range`). Best effort: a partition whose end is unknown (no
        leader now, an error) only costs a Fetch at the pre-commit, and a task that will not
        write to it must not fail for it."""
        self._ends_read.add(topic)
        try:
            ends = end_offsets(
                self._admin_client().kafka_admin, topic, timeout_ms=int(self._timeout_s * 1000)
            )
        except (Errors.KafkaError, DeadlineExceeded) as exc:
            _log.info("end offsets of %s unknown (%r): the pre-commit fetches instead", topic, exc)
            return
        self._ends_at_take.update(ends)

    def _producer_on_a_free_id(self, topic: str) -> tuple[Producer, str]:
        """Step 1: a connected producer on the first candidate id that is free. One producer
        and one describe in the usual case: an attempt's own slot is free unless another
        attempt holds it. A producer left behind never called ``init_transactions``, so
        dropping it fences nothing."""
        admin = self._admin_client()
        held = []
        for tid in self._candidates:
            stats = _ProducerStats()
            producer = self._new_producer(
                {
                    "transactional.id": tid,
                    "statistics.interval.ms": _STATS_INTERVAL_MS,
                    "stats_cb": stats,
                }
            )
            self._connect(producer, topic)
            now = admin.describe([tid])[tid]
            if now is None or now.state in _FREE:
                self._stats = stats
                self._taken_from = now
                return producer, tid
            held.append(
                f"{tid} ({now.state.value}, producer id {now.producer_id}, epoch {now.epoch})"
            )
        raise DeliveryFailed(
            f"every transactional id of this task holds an open transaction: {', '.join(held)}. "
            "Each belongs to another attempt of the task, still running, or failed or dead "
            "before the driver aborted it (a failed attempt leaves its transaction open for "
            "the driver's fence); taking one would abort a transaction the driver may be "
            "committing. The driver aborts them when it commits or aborts the batch; "
            "`kafka-eos txn list` shows them. Retry the task, or check why so many attempts of "
            "it ran at once"
        )

    def _connect(self, producer: Producer, topic: str) -> None:
        """Wait until the producer has a broker connection (it asks for ``topic``'s metadata),
        so that its ``init_transactions`` follows the describe of its id at once, without the
        connection's set-up (TLS, SASL) in between."""
        try:
            producer.list_topics(topic, timeout=self._timeout_s)
        except KafkaException as exc:
            raise DeliveryFailed(
                f"the producer for {self._candidates[0]} reached no broker within "
                f"{self._timeout_s} s ({exc.args[0].str()}); check kafka.bootstrap.servers and "
                "the security options, or raise the sink option flushTimeoutMs"
            ) from exc

    def _admin_client(self) -> TransactionAdmin:
        """The worker's pooled admin for this configuration, lent for the task: a new one
        per task cost a bootstrap, a version check and a coordinator lookup each time."""
        if self._admin is None:
            key = tuple(sorted(self._config.items()))
            lent = WORKER_ADMINS.lend(key, lambda: TransactionAdmin(self._config))
            self._admin = self._clients.enter_context(lent)
        return self._admin

    def _produce_all(self, batches: Iterable[pa.RecordBatch]) -> None:
        def checked() -> Iterable[pa.RecordBatch]:
            for batch in batches:
                self._check_age()
                yield batch

        super()._produce_all(checked())

    def _check_age(self) -> None:
        """Fail while the batch can still be replayed, not after the broker aborted it: a
        transaction older than its timeout less the driver's commit margin would be refused
        at the driver's verification anyway, after the whole batch ran."""
        if self._begun_at is None:
            return
        age_ms = (time.monotonic() - self._begun_at) * 1000
        limit_ms = self._age_limit_ms
        if age_ms > limit_ms:
            raise TransactionTooLong(
                f"transaction {self.transactional_id} has been open {age_ms / 1000:.1f} s, "
                f"past transaction.timeout.ms = {self._timeout_ms} less the driver's commit "
                f"margin ({limit_ms / 1000:.1f} s): the broker would abort it before the "
                "batch's commit. The batch is too large for the timeout. Raise "
                "kafka.transaction.timeout.ms (up to the broker's transaction.max.timeout.ms), "
                "or make batches smaller (maxOffsetsPerTrigger). A batch already logged in "
                "offsets/<N> is replayed as it is: see 'A batch that can never fit' in "
                "docs/sink.md"
            )

    def write_and_pre_commit(
        self, checkpoint_id: int, batches: Iterable[pa.RecordBatch]
    ) -> Committable:
        """Produce the input, then pre-commit at the barrier and return the committable."""
        with contextlib.ExitStack() as self._clients:  # the pooled admin, given back at the end
            return self._write_and_pre_commit(checkpoint_id, batches)

    def _write_and_pre_commit(
        self, checkpoint_id: int, batches: Iterable[pa.RecordBatch]
    ) -> Committable:
        try:
            self._produce_all(batches)
            if self._producer is None:
                # No input: no transaction was opened, nothing to commit.
                return Committable.nothing_written(self.transactional_id)
            crash_point(CrashPoint.TASK_BEFORE_PRE_COMMIT, checkpoint_id=checkpoint_id)
            self._flush()
            self._check_age()
            self._await_report_after(self._stats.reports)
            committable = self._describe_own_transaction()
            if self._taken_from is not None:
                self._refuse_a_joined_range(committable, self._taken_from)
                self._check_age()  # the check may have waited out a leader's move
            return committable
        except BaseException:
            # Not aborted here: the driver fences it (Spark's abort of the batch, or the sweep
            # before its decision), and then makes sure of its ABORT markers, which a Kafka 4.x
            # coordinator skips where a partition's leader is offline (KAFKA-20734). An abort
            # from here would leave such a range open with nobody checking, and a later
            # transaction of the id would join it. Meanwhile the id stays held, so a retry of
            # the task takes another. The queue is purged so that dropping the producer does
            # not wait for records nobody will commit.
            if self._producer is not None:
                with contextlib.suppress(KafkaException):
                    self._producer.purge(in_queue=True, in_flight=True, blocking=False)
            raise
        finally:
            # Drop, never close(): close() would abort the pre-committed transaction.
            self._producer = None
            self._admin = None

    def _refuse_a_joined_range(self, committable: Committable, taken_from: TxnDescription) -> None:
        """Fail if this transaction's records joined a range that an earlier, aborted
        transaction of the same producer left open on a partition: a Kafka 4.x coordinator
        skips the ABORT marker of a partition whose leader is offline (KAFKA-20734), and the
        leader then counts this transaction's records into that range, so its commit would
        make the aborted records visible too. The driver fences its transactions and writes
        such markers itself, but an abort it did not see (the transaction's timeout, a driver
        that died mid-fence) leaves nothing to write them, and the range waits, on a partition
        that the next transactions of the id may not write to, for any later one that does:
        so every transaction of an id that held one before is checked, not only the next.

        The range must begin with this transaction's own first batch, or, on an id taken
        from CompleteCommit at epoch S, with the committed transaction's: a COMMIT marker
        skipped where the driver did not write it (see
        :mod:`connectors.kafka.sink.marker_repair`), which this commit then completes. That
        transaction ran at S - 1 under transactions V2 and at S under V1, and neither epoch
        holds aborted records under the other (V2 writes nothing at S; under V1, S - 1 is a
        fence's epoch, which writes nothing), so both are allowed without asking which
        version the coordinator runs. The transaction stays open: the driver's fence aborts
        the whole range, and Spark retries the task on another id. A leader's move is waited
        out, up to the producer's timeout.

        Only a range that begins before the partition's end at the take (read after
        ``init_transactions`` fenced the earlier epochs, before this transaction's first record
        to the topic) has its first batch fetched: one that begins after it is this
        transaction's, since partition verification (KIP-890) refuses a write of a fenced
        epoch that no open range of it on the partition lets through. So the usual cost is a
        ListOffsets per leader for each topic at the take and a DescribeProducers per leader
        here. On a 4.x cluster with ``transaction.partition.verification.enable=false``, a
        fenced attempt's write that reaches the partition between the two could open a range
        this check then passes (docs/sink.md, "Limits")."""
        c = committable
        admin = self._admin_client()
        written = [TopicPartition(t, p) for t, p in c.partitions]

        def earlier_ranges() -> dict[TopicPartition, BatchHeader | None]:
            starts = {
                TopicPartition(o.topic, o.partition): o.start_offset
                for o in open_on_partitions(admin.kafka_admin, written)
                if o.producer_id == c.producer_id
            }
            ends = self._ends_at_take
            return {
                tp: admin.first_batch_at(tp, start)
                for tp, start in sorted(starts.items())
                if tp not in ends or start < ends[tp]
            }

        try:
            firsts = call_with_retries(
                earlier_ranges,
                deadline=Deadline(self._timeout_s),
                action=f"the joined-range check of {c.transactional_id}",
                is_retriable=_retriable,
            )
        except Errors.TopicAuthorizationFailedError as exc:
            raise DeliveryFailed(
                f"transaction {c.transactional_id} took an id that held a transaction before, "
                "and must check that it joined no range an abort left open, but this principal "
                f"may not read its partitions ({exc!r}): allow READ on the output topics "
                "(`kafka-acls --add --allow-principal User:<sink> --operation Read --operation "
                f"Describe --topic <topic>`). {self.aftermath}"
            ) from exc
        joinable = {(c.producer_id, c.epoch)}
        if taken_from.state is TxnState.COMPLETE_COMMIT:
            s = taken_from.epoch
            joinable |= {(taken_from.producer_id, s - 1), (taken_from.producer_id, s)}
        for tp, first in firsts.items():
            if first is not None and (first.producer_id, first.producer_epoch) in joinable:
                continue
            seen = (
                "a batch the log no longer holds"
                if first is None
                else f"epoch {first.producer_epoch}"
            )
            raise DeliveryFailed(
                f"transaction {c.transactional_id} (producer id {c.producer_id}, epoch "
                f"{c.epoch}) joined an aborted transaction's records on {tp.topic}-{tp.partition}: "
                f"the producer's open range there begins before this transaction, with "
                f"{seen}, an earlier transaction of the id whose ABORT marker the partition "
                "never got (KAFKA-20734, Kafka 4.x: its leader was offline as the coordinator "
                "ended it). Committing would make the aborted records visible. The driver's "
                f"fence aborts the whole range; Spark retries the task on another id. "
                f"{self.aftermath}"
            )

    def _raise_why_purged(self) -> None:
        """Ask the coordinator: a transaction whose id moved past this producer's epoch was
        fenced (by the driver's abort, `kafka-eos txn abort`, or another attempt's init)."""
        own = self._stats.producer_id_and_epoch
        tid = self.transactional_id
        now = self._admin_client().describe([tid])[tid]
        if own is None or standing_of(now, *own) in (Standing.UNKNOWN, Standing.HELD):
            return
        assert now is not None  # not open, or fenced
        raise DeliveryFailed(
            f"transaction {tid} (producer id {own[0]}, epoch {own[1]}) was fenced while the "
            f"task wrote: its id is now {now.state.value} at producer id {now.producer_id}, "
            f"epoch {now.epoch}. The driver aborted it (the batch failed or was stopped), "
            "`kafka-eos txn abort` did, or another attempt of the task took the id; the "
            f"producer can write no more. Spark retries the task. {self.aftermath}"
        )

    def _await_report_after(self, reports: int) -> None:
        """Wait for a statistics report made after ``reports`` (counted once the flush
        returned): every record was delivered by then, so it names every partition this
        producer wrote to, and it has the producer id and epoch."""
        assert self._producer is not None
        deadline = Deadline(self._timeout_s)
        while self._stats.reports <= reports or self._stats.producer_id_and_epoch is None:
            if deadline.expired():
                raise DeliveryFailed(
                    f"transaction {self.transactional_id}: librdkafka reported no statistics "
                    f"within {self._timeout_s} s (statistics.interval.ms = "
                    f"{_STATS_INTERVAL_MS}), so this task cannot prove which transaction is its "
                    "own; raise the sink option flushTimeoutMs if the brokers are slow"
                )
            self._poll(self._producer, _STATS_INTERVAL_MS / 1000)

    def _describe_own_transaction(self) -> Committable:
        """The committable, once the coordinator shows this producer's own transaction, with
        every partition it wrote to, begun before its first record was acknowledged."""
        tid, stats = self.transactional_id, self._stats
        assert stats.producer_id_and_epoch is not None
        producer_id, epoch = stats.producer_id_and_epoch
        now = self._admin_client().describe([tid])[tid]
        written = stats.partitions()
        acked_ms = stats.first_acked_ms or int(time.time() * 1000)
        standing = standing_of(
            now,
            producer_id,
            epoch,
            begun_by_ms=acked_ms + CLOCK_SKEW_TOLERANCE_MS,
            partitions=written,
        )
        if standing in (Standing.UNKNOWN, Standing.NOT_OPEN):
            raise DeliveryFailed(
                f"transaction {tid} is not open after its flush "
                f"({now.state.value if now else 'unknown id'}): the driver aborted it (this "
                "attempt lost to another attempt of the task), or it timed out"
            )
        assert now is not None
        if standing is Standing.FENCED:
            # Another attempt of this task took the same id between this one's choice of it
            # and its init: the open transaction is the other attempt's, and committing it
            # would lose this batch.
            raise DeliveryFailed(
                f"transaction {tid} was fenced after its flush: this task holds producer id "
                f"{producer_id}, epoch {epoch}, but the open transaction is producer id "
                f"{now.producer_id}, epoch {now.epoch}. Another attempt of the same task "
                "took the same transactional id at the same moment; Spark retries this one"
            )
        if standing in (Standing.PARTITION_MISSING, Standing.BEGUN_AGAIN):
            # The transaction was ended at this producer's own epoch while it wrote (under
            # transactions V1, by anything but a fence), and its next partition began a new
            # one: committing it would lose everything written before, silently.
            raise DeliveryFailed(
                f"transaction {tid} (producer id {producer_id}, epoch {epoch}) is not the one "
                f"this task wrote: its coordinator lists partitions {list(now.partitions)}, "
                f"without {now.missing(written)} that this producer wrote to, and says it began at "
                f"{now.start_time_ms} ms, against {acked_ms} ms when this producer's first "
                "record was acknowledged. Something ended the task's transaction at its own "
                "epoch (a release of kafka-eos before fences, or another tool's abort) and the "
                "producer began another; the records written before are aborted. Spark retries "
                "the task. If only the times differ, check that the clocks of the brokers and "
                f"the executors agree within {CLOCK_SKEW_TOLERANCE_MS // 1000} s (NTP)"
            )
        # The partitions as the coordinator holds them: those it writes the markers to.
        return Committable(
            tid, producer_id, epoch, self.record_count, now.partitions, now.start_time_ms
        )
