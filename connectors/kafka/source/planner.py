"""The driver's planning of a read, whatever engine asks: the offsets a stream starts from,
where each batch ends, and the offset ranges its tasks read.

A stream's start is made durable in the engine's offset log, since the source never sees a
checkpoint of its own (a Python reader cannot keep its initial offsets there, as Spark's Kafka
source does):

1. :meth:`StreamPlanner.initial_offsets` resolves the starting option once per process and
   keeps it, but keeps "latest" as -1: Spark asks again on every trigger until batch 0 is
   planned, and again when it replays batch 0 after a restart.
2. The first :meth:`StreamPlanner.next_end` pins every -1 to the latest offset and admits
   nothing: batch 0 reads nothing and only writes the pinned start to the offset log.
3. :meth:`StreamPlanner.ranges` of a start holding -1 plans nothing, so a replay of batch 0
   reads the same (empty) range however "latest" moved; batch 1 starts at the pinned offsets.

A concrete start (earliest, timestamps, offsets) is resolved again by a restarted driver that
replays batch 0, and may then name partitions added since batch 0 was planned. Batch 0 is
replayed over exactly the partitions of its logged end; the new ones are found by batch 1 and
read from their log starts, as any partition found after the start. For the same reason a JSON
start that leaves out existing partitions fails when this process plans batch 0
(:meth:`StreamPlanner.next_end`), not in :meth:`StreamPlanner.initial_offsets`: at a replay,
the left-out partitions are the new ones, and the batch 0 being replayed passed the check when
it was planned.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from checkpoint.errors import DeadlineExceeded
from connectors.kafka.source.admission import (
    TriggerDelay,
    available_now_end,
    backlog,
    pin_latest,
    rate_limit,
    with_new_partitions,
)
from connectors.kafka.source.errors import KafkaSourceError, SourceOptionError, report_data_loss
from connectors.kafka.source.lag import PinnedLso, pinned_warning
from connectors.kafka.source.offset_reader import KafkaOffsetReader, not_exactly_named
from connectors.kafka.source.offsets import (
    EARLIEST,
    LATEST,
    PartitionKey,
    PartitionOffsets,
    describe,
    from_json_dict,
)
from connectors.kafka.source.options import BoundKind, SourceOptions
from connectors.kafka.source.ranges import OffsetRange, batch_ranges, plan_ranges

_log = logging.getLogger(__name__)


def batch_read_ranges(options: SourceOptions, driver_group: str) -> list[OffsetRange]:
    """A batch read's ranges: from ``startingOffsets`` to ``endingOffsets``, asked of Kafka
    now."""
    kafka = KafkaOffsetReader(options, driver_group)
    try:
        keys = partitions_to_start(kafka, options)
        start = kafka.resolve(options.starting, keys)
        end = kafka.resolve(options.ending, keys)
        latest = end if options.ending.kind == BoundKind.LATEST else kafka.latest(keys)
    finally:
        kafka.close()
    return batch_ranges(
        start,
        end,
        latest,
        starting=options.starting.option,
        ending=options.ending.option,
        end_by_timestamp=options.ending.kind.by_timestamp,
        fail_on_data_loss=options.fail_on_data_loss,
    )


class StreamPlanner:
    """A stream's planning on the driver, in one long-lived process per query, which keeps
    the Kafka clients used for metadata and offsets."""

    def __init__(self, options: SourceOptions, driver_group: str) -> None:
        self._options = options
        self.kafka = KafkaOffsetReader(options, driver_group)
        low, delay = options.min_offsets_per_trigger, options.max_trigger_delay_s
        self._delay = TriggerDelay(low, delay) if low is not None else None
        self._initial: PartitionOffsets | None = None  # Step 1: stable within this process
        # A JSON start that leaves out partitions: raised if this process plans batch 0.
        self._unnamed: SourceOptionError | None = None
        # The end next_end last gave for the initial start: a batch 0 that this process
        # planned, and so not a replay of one logged by an earlier driver.
        self._end_from_initial: PartitionOffsets | None = None
        self._target: PartitionOffsets | None = None  # the end of Trigger.AvailableNow
        self.latest_seen: PartitionOffsets | None = None  # the newest offsets seen
        self._pinned: PinnedLso | None = None  # created with the first next_end

    def initial_offsets(self) -> PartitionOffsets:
        """Step 1."""
        if self._initial is None:
            starting = self._options.starting
            keys = partitions_to_start(self.kafka, self._options)
            named = set(starting.offsets) if starting.kind.per_partition else None
            if named is not None and named < set(keys):
                # Maybe a replay of batch 0, after partitions were added: see the module doc.
                self._unnamed = not_exactly_named(starting, keys)
                keys = sorted(named)
            self._initial = self.kafka.resolve(starting, keys, keep_latest=True)
        return self._initial

    def fix_end_now(self) -> None:
        """Trigger.AvailableNow: partitions and records that appear later wait for the next
        run."""
        self._target = self.kafka.latest(self.kafka.partitions())

    def next_end(
        self, begin: PartitionOffsets, *, all_available: bool, max_rows: int | None
    ) -> PartitionOffsets:
        """Where the batch starting at ``begin`` ends: everything available
        (``all_available``, or no limit), at most ``max_rows`` records, and with
        ``minOffsetsPerTrigger`` from the options, which is ignored under AvailableNow, where
        waiting for more data would never end."""
        if begin != self._initial:
            return self._end(begin, all_available, max_rows)
        if self._unnamed is not None:
            raise self._unnamed  # this process plans batch 0: the JSON start is the user's
        self._end_from_initial = self._end(begin, all_available, max_rows)
        return self._end_from_initial

    def _end(
        self, begin: PartitionOffsets, all_available: bool, max_rows: int | None
    ) -> PartitionOffsets:
        # A partition of the start that this answer left out stays, at its start offset,
        # unless its deletion is confirmed: one answer saying "unknown" must not drop it.
        found, held = self.kafka.latest_since(begin)
        self.latest_seen = found
        self._watch_lso(found)
        latest = {**found, **held}
        if LATEST in begin.values():
            # Step 2: pinning cannot wait for minOffsetsPerTrigger. Under AvailableNow "latest"
            # is the end fixed when the run began, so later records go to the next run.
            return pin_latest(begin, {**latest, **(self._target or {})})
        if self._target is not None:
            latest = available_now_end(begin, self._target, latest)
        if all_available:
            return latest
        delay = self._delay if self._target is None else None
        if delay is None and max_rows is None:
            return latest
        # New partitions are read from their log start (ranges()): count them from there.
        origin = with_new_partitions(begin, self._earliest_of_new(begin, latest))
        if delay is not None and not delay.admit(sum(backlog(origin, latest).values())):
            return dict(begin)
        if max_rows is not None:
            return rate_limit(origin, latest, max_rows)
        return latest

    def ranges(self, begin: PartitionOffsets, end: dict) -> list[OffsetRange]:
        """The ranges of the batch from ``begin`` to ``end`` (as the offset log holds it): a
        batch is planned, and batch 0 was checked by the driver that logged its end."""
        self._unnamed = None
        if LATEST in begin.values():
            return []  # Step 3: batch 0, which only pins the start
        stop = from_json_dict(end, what="the batch end in Spark's offset log")
        if begin == self._initial and stop != self._end_from_initial:
            # Batch 0 logged by an earlier driver: the engine passes the start this process
            # resolved again, which may name partitions added since. Replayed over the
            # partitions of its logged end only; batch 1 finds the new ones (from their log
            # starts).
            begin = {key: offset for key, offset in begin.items() if key in stop}
        # A new partition's start is its log start now, as in Spark: nothing in the offset log
        # records it. See "Partitions found after the start" in docs/source.md for replays.
        ranges, lost = plan_ranges(begin, stop, self._earliest_of_new(begin, stop))
        for detail in lost:
            report_data_loss(detail, fail=self._options.fail_on_data_loss)
        return ranges

    def commit(self, end: dict) -> None:
        """For lag monitoring only, when ``kafka.group.id`` is set; recovery never reads it."""
        if self._options.group_id is not None:
            self.kafka.commit(from_json_dict(end, what="the committed batch end"))

    def close(self) -> None:
        self.kafka.close()

    def latest_for_progress(self) -> PartitionOffsets | None:
        """The newest offsets, for Spark's progress (``latestOffset``; lag is latest less the
        batch's end): under ``read_committed`` the high watermarks, so that what a transaction
        holds back shows as lag, a hanging one too; the last stable offsets seen when the
        watermarks cannot be read now, since a report never fails the query."""
        seen = self.latest_seen
        if seen is None or self._options.isolation_level != "read_committed":
            return seen
        high = self._high_watermarks(seen, "progress reports the last stable offsets")
        return seen if high is None else {**seen, **high}

    def _watch_lso(self, lso: PartitionOffsets) -> None:
        """Warn of an LSO pinned below the high watermark for longer than the broker's
        ``transaction.max.timeout.ms`` (a hanging transaction: in Spark's progress only as
        lag that never falls); the high watermarks are asked at most every 10 s."""
        if self._options.isolation_level != "read_committed":
            return
        if self._pinned is None:
            self._pinned = PinnedLso(self._threshold_s)
        elif not self._pinned.due():
            return
        high = self._high_watermarks(lso, "pinned-LSO check skipped on this trigger")
        if high is None:
            return
        for pinned in self._pinned.observe(lso, high):
            threshold_ms = round(self._pinned.threshold_s * 1000)
            _log.warning(pinned_warning(pinned, threshold_ms, self._options.bootstrap_servers))

    def _high_watermarks(self, lso: PartitionOffsets, otherwise: str) -> PartitionOffsets | None:
        """The high watermarks of the partitions ``lso`` knows; None, logged with what happens
        ``otherwise``, when they cannot be read: a monitoring aid never fails the query (e.g. a
        topic deleted since the LSO)."""
        try:
            return self.kafka.high_watermarks(key for key, offset in lso.items() if offset >= 0)
        except (KafkaSourceError, DeadlineExceeded) as exc:
            _log.info("kafka-eos source: %s: %s", otherwise, exc)
            return None

    def _threshold_s(self) -> float:
        """The broker's ``transaction.max.timeout.ms`` in seconds, asked when first needed."""
        return self.kafka.transaction_max_timeout_ms() / 1000

    def _earliest_of_new(
        self, begin: PartitionOffsets, end: Mapping[PartitionKey, int]
    ) -> PartitionOffsets:
        """The log starts of the partitions of ``end`` that ``begin`` lacks (new since), asked
        of Kafka now; no request when there are none, as on almost every trigger."""
        new = [key for key in end if key not in begin]
        return self.kafka.list_offsets(dict.fromkeys(new, EARLIEST)) if new else {}


def partitions_to_start(kafka: KafkaOffsetReader, options: SourceOptions) -> list[PartitionKey]:
    """The partitions now; with ``assign`` they must all exist, or the start is not the
    user's (confirmed: one answer calling a partition unknown does not fail the query)."""
    keys = kafka.partitions_to_start()
    missing = set(options.subscription.partitions) - set(keys)
    if missing:
        raise SourceOptionError(
            "assign",
            ", ".join(describe(key) for key in sorted(missing)),
            "these partitions do not exist; create them or assign existing ones",
        )
    return keys
