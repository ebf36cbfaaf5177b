"""The stream reader's planning on the driver, with a fake Kafka: which end each trigger gets,
and what Spark is told. No broker and no SparkSession."""

from __future__ import annotations

import pickle
from collections.abc import Iterable

import pytest
from kafka_metadata import FakeCluster

from connectors.kafka.source import client as source_client
from connectors.kafka.source.errors import DataLossError, KafkaSourceError, SourceOptionError
from connectors.kafka.source.offsets import PartitionKey, PartitionOffsets
from connectors.kafka.source.options import BoundKind, OffsetBound
from connectors.kafka.source.ranges import OffsetRange
from connectors.spark.compat import ReadAllAvailable, ReadMaxRows, ReadMinRows
from connectors.spark.source import KafkaStreamReader, source_schema

OPTIONS = {"kafka.bootstrap.servers": "k:9092", "subscribe": "t", "startingoffsets": "earliest"}


def test_progress_reports_the_high_watermark_so_a_held_back_lso_shows_as_lag() -> None:
    """Under read_committed the batch ends at the LSO; latestOffset in Spark's progress is the
    high watermark, so lag (latest - end) counts an open transaction, a hanging one too."""
    stream, kafka = reader({("t", 0): 100, ("t", 1): 100})
    kafka.high_offsets = {("t", 0): 130}  # partition 0's LSO held back by a transaction
    start = {"t": {"0": 0, "1": 0}}
    assert stream.latestOffset(start, ReadAllAvailable()) == {"t": {"0": 100, "1": 100}}
    assert stream.reportLatestOffset() == {"t": {"0": 130, "1": 100}}


def test_progress_falls_back_to_the_lso_when_the_watermarks_cannot_be_read() -> None:
    stream, kafka = reader({("t", 0): 100})
    start = {"t": {"0": 0}}
    stream.latestOffset(start, ReadAllAvailable())

    def unreadable(keys: Iterable[PartitionKey]) -> PartitionOffsets:
        raise KafkaSourceError("list offsets failed: Local: Timed out")

    kafka.high_watermarks = unreadable  # type: ignore[method-assign]
    assert stream.reportLatestOffset() == {"t": {"0": 100}}


def test_under_read_uncommitted_progress_reports_what_the_batch_saw() -> None:
    stream, kafka = reader({("t", 0): 100}, **{"kafka.isolation.level": "read_uncommitted"})
    stream.latestOffset({"t": {"0": 0}}, ReadAllAvailable())
    asked = kafka.high_asked
    assert stream.reportLatestOffset() == {"t": {"0": 100}} and kafka.high_asked == asked


class FakeKafka:
    """Answers the driver's questions from a dict of latest offsets, and earliest offsets (0
    unless set in ``earliest_offsets``)."""

    def __init__(self, latest: PartitionOffsets) -> None:
        self.latest_offsets = latest
        self.earliest_offsets: PartitionOffsets = {}
        self.earliest_asked: list[list[PartitionKey]] = []
        self.committed: list[PartitionOffsets] = []
        self.resolved = 0
        self.high_offsets: PartitionOffsets = {}  # the high watermark, if above the latest
        self.high_asked = 0

    def partitions(self) -> list[PartitionKey]:
        return sorted(self.latest_offsets)

    def partitions_to_start(self) -> list[PartitionKey]:
        return self.partitions()

    def latest(self, keys: list[PartitionKey]) -> PartitionOffsets:
        return {key: self.latest_offsets[key] for key in keys}

    def latest_since(self, start: PartitionOffsets) -> tuple[PartitionOffsets, PartitionOffsets]:
        """A partition missing from ``latest_offsets`` counts as confirmed deleted here; the
        real confirmation is tested with a real KafkaOffsetReader below."""
        return self.latest(self.partitions()), {}

    def high_watermarks(self, keys: Iterable[PartitionKey]) -> PartitionOffsets:
        self.high_asked += 1
        return {key: self.high_offsets.get(key, self.latest_offsets[key]) for key in keys}

    def transaction_max_timeout_ms(self) -> int:
        return 900_000

    def list_offsets(self, query: PartitionOffsets) -> PartitionOffsets:
        assert set(query.values()) == {-2}, "only earliest offsets are asked here"
        self.earliest_asked.append(sorted(query))
        return {key: self.earliest_offsets.get(key, 0) for key in query}

    def resolve(
        self, bound: OffsetBound, keys: list[PartitionKey], *, keep_latest: bool = False
    ) -> PartitionOffsets:
        self.resolved += 1
        if bound.kind is BoundKind.LATEST:
            return dict.fromkeys(keys, -1) if keep_latest else self.latest(keys)
        return dict.fromkeys(keys, 0)

    def commit(self, offsets: PartitionOffsets) -> None:
        self.committed.append(offsets)

    def close(self) -> None:
        pass


def reader(latest: PartitionOffsets, **options: str) -> tuple[KafkaStreamReader, FakeKafka]:
    merged = {**OPTIONS, **options}
    stream = KafkaStreamReader(merged, source_schema(merged))
    fake = FakeKafka(latest)
    stream._planner.kafka = fake  # type: ignore[assignment]
    return stream, fake


def test_the_reader_pickles_small_before_any_kafka_call() -> None:
    """Spark pickles the reader to the executors with ``read``."""
    assert len(pickle.dumps(KafkaStreamReader(OPTIONS, source_schema(OPTIONS)))) < 4000


def test_initial_offset_and_read_limits() -> None:
    stream, _ = reader({("t", 0): 10, ("t", 1): 5})
    assert stream.initialOffset() == {"t": {"0": 0, "1": 0}}
    assert stream.getDefaultReadLimit() == ReadAllAvailable()
    assert reader({}, maxOffsetsPerTrigger="7")[0].getDefaultReadLimit() == ReadMaxRows(7)
    assert reader({}, minOffsetsPerTrigger="3")[0].getDefaultReadLimit() == ReadMinRows(3)


def test_latest_offset_honours_the_limit_spark_passes() -> None:
    stream, _ = reader({("t", 0): 100, ("t", 1): 100}, maxOffsetsPerTrigger="10")
    start = {"t": {"0": 0, "1": 0}}
    assert stream.latestOffset(start, ReadMaxRows(10)) == {"t": {"0": 5, "1": 5}}
    # Trigger.Once: everything, whatever the options say.
    assert stream.latestOffset(start, ReadAllAvailable()) == {"t": {"0": 100, "1": 100}}
    assert stream.reportLatestOffset() == {"t": {"0": 100, "1": 100}}


def test_min_offsets_hold_the_batch_back_by_returning_the_start() -> None:
    stream, fake = reader({("t", 0): 5}, minOffsetsPerTrigger="50", maxTriggerDelay="1h")
    start = {"t": {"0": 0}}
    assert stream.latestOffset(start, ReadMinRows(50)) == {"t": {"0": 5}}  # first trigger
    fake.latest_offsets = {("t", 0): 30}
    assert stream.latestOffset({"t": {"0": 5}}, ReadMinRows(50)) == {"t": {"0": 5}}
    fake.latest_offsets = {("t", 0): 55}
    assert stream.latestOffset({"t": {"0": 5}}, ReadMinRows(50)) == {"t": {"0": 55}}


def test_available_now_fixes_the_end_and_ignores_the_minimum() -> None:
    stream, fake = reader(
        {("t", 0): 40}, minOffsetsPerTrigger="20", maxOffsetsPerTrigger="25", maxTriggerDelay="1h"
    )
    stream.prepareForTriggerAvailableNow()
    fake.latest_offsets = {("t", 0): 90, ("t", 1): 9}  # arrives after the start: not this run
    assert stream.latestOffset({"t": {"0": 0}}, ReadMaxRows(25)) == {"t": {"0": 25}}
    # 15 offsets < minOffsetsPerTrigger, but waiting for more would never end this run.
    assert stream.latestOffset({"t": {"0": 25}}, ReadMaxRows(25)) == {"t": {"0": 40}}
    assert stream.latestOffset({"t": {"0": 40}}, ReadMaxRows(25)) == {"t": {"0": 40}}


def test_partitions_plan_new_partitions_from_zero_and_split() -> None:
    stream, _ = reader({}, minPartitions="4")
    tasks = stream.partitions({"t": {"0": 10}}, {"t": {"0": 40, "1": 10}})
    assert [task.value for task in tasks] == [
        OffsetRange("t", 0, 10, 20),
        OffsetRange("t", 0, 20, 30),
        OffsetRange("t", 0, 30, 40),
        OffsetRange("t", 1, 0, 10),
    ]


def test_new_partitions_are_rate_limited_and_planned_from_their_log_start() -> None:
    """Issue 13, finding 4: a topic matching the pattern appears with its log starting at
    1,000,000. Spark fetches its earliest offset, shares ``maxOffsetsPerTrigger`` in
    proportion to latest - earliest, and plans it from there, reporting the deleted head
    once."""
    stream, fake = reader(
        {("t", 0): 1000, ("u", 0): 1_001_000}, maxOffsetsPerTrigger="100", failOnDataLoss="false"
    )
    fake.earliest_offsets = {("u", 0): 1_000_000}
    start = {"t": {"0": 0}}
    end = stream.latestOffset(start, ReadMaxRows(100))
    assert end == {"t": {"0": 50}, "u": {"0": 1_000_050}}
    tasks = stream.partitions(start, end)
    assert [task.value for task in tasks] == [
        OffsetRange("t", 0, 0, 50),
        OffsetRange("u", 0, 1_000_000, 1_000_050),
    ]
    assert fake.earliest_asked == [[("u", 0)], [("u", 0)]]
    # Once planned, the partition is in the start: no more lookups, no more loss.
    following = stream.latestOffset(end, ReadMaxRows(100))
    assert following == {"t": {"0": 100}, "u": {"0": 1_000_100}}
    stream.partitions(end, following)
    assert fake.earliest_asked == [[("u", 0)], [("u", 0)]]


def test_a_new_partition_with_a_deleted_head_is_data_loss_by_default() -> None:
    stream, fake = reader({("t", 0): 10, ("u", 0): 70})
    fake.earliest_offsets = {("u", 0): 60}
    with pytest.raises(DataLossError, match=r"u-0 appeared with its log starting at offset 60"):
        stream.partitions({"t": {"0": 0}}, {"t": {"0": 10}, "u": {"0": 70}})


def test_gone_partitions_fail_or_are_skipped() -> None:
    strict, _ = reader({})
    with pytest.raises(DataLossError, match="u-0 is gone"):
        strict.partitions({"t": {"0": 1}, "u": {"0": 4}}, {"t": {"0": 3}})
    lenient, _ = reader({}, failOnDataLoss="false")
    tasks = lenient.partitions({"t": {"0": 1}, "u": {"0": 4}}, {"t": {"0": 3}})
    assert [task.value for task in tasks] == [OffsetRange("t", 0, 1, 3)]


def test_commit_goes_to_the_group_only_when_one_is_set() -> None:
    anonymous, fake = reader({})
    anonymous.commit({"t": {"0": 3}})
    assert fake.committed == []
    monitored, fake = reader({}, **{"kafka.group.id": "lag"})
    monitored.commit({"t": {"0": 3}})
    assert fake.committed == [{("t", 0): 3}]


def test_latest_stays_symbolic_until_batch_0_pins_it_without_reading() -> None:
    """A start resolved anew on each call would move: records between Spark's calls, or
    produced during a batch 0 that crashed, would be skipped or reported lost."""
    stream, fake = reader(
        {("t", 0): 100, ("t", 1): 40},
        startingOffsets="latest",
        minOffsetsPerTrigger="50",
        maxTriggerDelay="1h",
    )
    initial = stream.initialOffset()
    assert initial == {"t": {"0": -1, "1": -1}}
    fake.latest_offsets = {("t", 0): 120, ("t", 1): 45}
    assert stream.initialOffset() == initial
    # Pinning admits nothing and does not wait for minOffsetsPerTrigger.
    end = stream.latestOffset(initial, ReadMaxRows(10))
    assert end == {"t": {"0": 120, "1": 45}}
    assert stream.partitions(initial, end) == []
    # The replay of batch 0 after a restart reads the same (empty) range, however far
    # "latest" has moved by then; batch 1 starts at the pinned offsets.
    fake.latest_offsets = {("t", 0): 500, ("t", 1): 45}
    assert stream.partitions(initial, end) == []
    assert [task.value for task in stream.partitions(end, {"t": {"0": 130, "1": 45}})] == [
        OffsetRange("t", 0, 120, 130)
    ]


def test_pinning_keeps_concrete_starts_and_drops_gone_partitions() -> None:
    stream, _ = reader({("t", 0): 100, ("t", 1): 40})
    start = {"t": {"0": -1, "1": 7}, "u": {"0": -1}}  # u was deleted before batch 0
    assert stream.latestOffset(start, ReadAllAvailable()) == {"t": {"0": 100, "1": 7}}
    assert stream.partitions(start, {"t": {"0": 100, "1": 7}}) == []


def test_concrete_starting_offsets_are_resolved_once() -> None:
    stream, fake = reader({("t", 0): 10})
    assert stream.initialOffset() == stream.initialOffset() == {"t": {"0": 0}}
    assert fake.resolved == 1


def test_available_now_end_never_goes_below_the_start() -> None:
    """Records and partitions that appear between fixing the end and pinning the start."""
    stream, fake = reader({("t", 0): 40})
    stream.prepareForTriggerAvailableNow()
    fake.latest_offsets = {("t", 0): 90, ("t", 1): 9}
    start = {"t": {"0": 60, "1": 3}}
    end = stream.latestOffset(start, ReadAllAvailable())
    assert end == start
    assert stream.partitions(start, end) == []  # not "went back", not "t-1 is gone"
    assert stream.reportLatestOffset() == {"t": {"0": 90, "1": 9}}


def test_available_now_still_reports_a_partition_that_went_back() -> None:
    stream, fake = reader({("t", 0): 40})
    stream.prepareForTriggerAvailableNow()
    fake.latest_offsets = {("t", 0): 5}  # the topic was recreated
    end = stream.latestOffset({"t": {"0": 30}}, ReadAllAvailable())
    assert end == {"t": {"0": 5}}
    with pytest.raises(DataLossError, match="went back from 30 to 5"):
        stream.partitions({"t": {"0": 30}}, end)


def test_available_now_pins_latest_at_the_end_fixed_when_the_run_began() -> None:
    stream, fake = reader({("t", 0): 40}, startingOffsets="latest")
    stream.prepareForTriggerAvailableNow()
    fake.latest_offsets = {("t", 0): 70}  # read by the next run, not skipped
    initial = stream.initialOffset()
    assert stream.latestOffset(initial, ReadAllAvailable()) == {"t": {"0": 40}}
    assert stream.latestOffset({"t": {"0": 40}}, ReadAllAvailable()) == {"t": {"0": 40}}


class TestPartitionUnknownForOneAnswer:
    """The whole driver path (stream reader, offset reader, confirmation) over a fake cluster:
    a partition that one trigger's metadata answer leaves out is neither reported lost nor
    dropped, and the next trigger resumes it from its last planned offset, never from 0."""

    @pytest.fixture(autouse=True)
    def _quick_confirmation(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(source_client, "_GONE_CONFIRM_S", 0.0)
        monkeypatch.setattr(source_client, "_GONE_POLL_S", 0.0)

    def stream(self, cluster: FakeCluster, **options: str) -> KafkaStreamReader:
        merged = {**OPTIONS, "subscribePattern": "o-.*", **options}
        del merged["subscribe"]
        stream = KafkaStreamReader(merged, source_schema(merged))
        stream._planner.kafka._consumer = cluster  # type: ignore[assignment]
        stream._planner.kafka._admin_client = cluster  # type: ignore[assignment]
        stream._planner.kafka._uncommitted = cluster  # type: ignore[assignment]  # no LSO pinned here
        return stream

    @pytest.mark.parametrize("fail_on_data_loss", ["true", "false"])
    def test_a_partition_left_out_once_resumes_from_its_last_planned_offset(
        self, fail_on_data_loss: str
    ) -> None:
        cluster = FakeCluster({("o-1", 0): 10, ("o-2", 0): 10})
        stream = self.stream(cluster, failOnDataLoss=fail_on_data_loss)
        start = stream.initialOffset()
        end = stream.latestOffset(start, ReadAllAvailable())
        assert end == {"o-1": {"0": 10}, "o-2": {"0": 10}}
        stream.commit(end)

        cluster.latest = {("o-1", 0): 20, ("o-2", 0): 20}
        cluster.lie_about = "o-2"
        cluster.asked_offsets.clear()
        start, end = end, stream.latestOffset(end, ReadAllAvailable())
        assert end == {"o-1": {"0": 20}, "o-2": {"0": 10}}  # held where it was, not dropped
        assert cluster.asked_offsets == [("o-1", 0)]
        assert [t.value for t in stream.partitions(start, end)] == [OffsetRange("o-1", 0, 10, 20)]

        start, end = end, stream.latestOffset(end, ReadAllAvailable())
        assert end == {"o-1": {"0": 20}, "o-2": {"0": 20}}
        assert [t.value for t in stream.partitions(start, end)] == [OffsetRange("o-2", 0, 10, 20)]

    def test_a_confirmed_deletion_is_reported_as_data_loss(self) -> None:
        cluster = FakeCluster({("o-1", 0): 10, ("o-2", 0): 10})
        strict = self.stream(cluster)
        start = {"o-1": {"0": 10}, "o-2": {"0": 10}}
        cluster.latest = {("o-1", 0): 20}  # o-2 deleted: every answer says so
        end = strict.latestOffset(start, ReadAllAvailable())
        assert end == {"o-1": {"0": 20}}
        with pytest.raises(DataLossError, match="o-2-0 is gone"):
            strict.partitions(start, end)
        lenient = self.stream(cluster, failOnDataLoss="false")
        assert [t.value for t in lenient.partitions(start, end)] == [OffsetRange("o-1", 0, 10, 20)]

    def test_a_maximum_per_trigger_admits_nothing_from_a_held_partition(self) -> None:
        cluster = FakeCluster({("o-1", 0): 100, ("o-2", 0): 100})
        stream = self.stream(cluster, maxOffsetsPerTrigger="10")
        cluster.lie_about = "o-2"
        end = stream.latestOffset({"o-1": {"0": 0}, "o-2": {"0": 40}}, ReadMaxRows(10))
        assert end == {"o-1": {"0": 10}, "o-2": {"0": 40}}

    def test_latest_is_not_pinned_while_a_partition_is_left_out(self) -> None:
        cluster = FakeCluster({("o-1", 0): 10, ("o-2", 0): 30})
        stream = self.stream(cluster, startingOffsets="latest")
        initial = stream.initialOffset()
        assert initial == {"o-1": {"0": -1}, "o-2": {"0": -1}}
        cluster.lie_about = "o-2"
        assert stream.latestOffset(initial, ReadAllAvailable()) == initial  # no batch yet
        cluster.latest = {("o-1", 0): 12, ("o-2", 0): 31}
        assert stream.latestOffset(initial, ReadAllAvailable()) == {
            "o-1": {"0": 12},
            "o-2": {"0": 31},
        }

    def test_available_now_reads_a_held_partition_to_the_end_fixed_at_the_start(self) -> None:
        cluster = FakeCluster({("o-1", 0): 10, ("o-2", 0): 30})
        stream = self.stream(cluster)
        stream.prepareForTriggerAvailableNow()
        cluster.lie_about = "o-2"
        end = stream.latestOffset({"o-1": {"0": 0}, "o-2": {"0": 5}}, ReadAllAvailable())
        assert end == {"o-1": {"0": 10}, "o-2": {"0": 30}}


LOGGED_END = {"t": {"0": 10, "1": 10}}  # offsets/0, written when t had two partitions


class TestBatch0ReplayedAfterPartitionsWereAdded:
    """A restarted driver replays batch 0 with the start it resolves again (Spark keeps no
    initial offset for a Python source) and the end logged before the crash. Partitions added
    in between are in the one and not in the other: batch 0 reads only those of its logged
    end, each from its start, and batch 1 reads the new ones from offset 0."""

    def stream(self, cluster: FakeCluster, **options: str) -> KafkaStreamReader:
        merged = {**OPTIONS, **options}
        stream = KafkaStreamReader(merged, source_schema(merged))
        stream._planner.kafka._consumer = cluster  # type: ignore[assignment]
        stream._planner.kafka._admin_client = cluster  # type: ignore[assignment]
        # Starting timestamps are looked up under read_uncommitted, by a second consumer.
        stream._planner.kafka._uncommitted = cluster  # type: ignore[assignment]
        return stream

    @pytest.mark.parametrize(
        ("options", "first"),
        [
            ({}, 0),
            ({"startingOffsets": '{"t": {"0": 5, "1": 5}}'}, 5),
            ({"startingOffsetsByTimestamp": '{"t": {"0": 1, "1": 1}}'}, 10),
            ({"startingTimestamp": "1"}, 10),
        ],
        ids=["earliest", "offsets", "timestamps", "timestamp"],
    )
    def test_the_replay_reads_its_logged_partitions_and_batch_1_the_new_one(
        self, options: dict[str, str], first: int
    ) -> None:
        """(The fake cluster finds every timestamp at the latest offset.)"""
        cluster = FakeCluster({("t", 0): 10, ("t", 1): 10, ("t", 2): 4})
        stream = self.stream(cluster, **options)
        initial = stream.initialOffset()
        replayed = stream.partitions(initial, LOGGED_END)
        assert [task.value for task in replayed] == [
            OffsetRange("t", p, first, 10) for p in (0, 1) if first < 10
        ]
        end = stream.latestOffset(LOGGED_END, ReadAllAvailable())
        assert end == {"t": {"0": 10, "1": 10, "2": 4}}
        tasks = stream.partitions(LOGGED_END, end)
        assert [task.value for task in tasks] == [OffsetRange("t", 2, 0, 4)]

    def test_a_logged_end_equal_to_the_start_does_not_fail_the_next_batch(self) -> None:
        """Batch 0 read nothing: batch 1 starts at offsets equal to the initial ones."""
        cluster = FakeCluster({("t", 0): 10, ("t", 1): 10, ("t", 2): 4})
        stream = self.stream(cluster, startingOffsets='{"t": {"0": 10, "1": 10}}')
        initial = stream.initialOffset()
        assert initial == LOGGED_END
        assert stream.partitions(initial, LOGGED_END) == []
        end = stream.latestOffset(LOGGED_END, ReadAllAvailable())
        assert end == {"t": {"0": 10, "1": 10, "2": 4}}

    def test_a_json_start_leaving_out_a_partition_still_fails_a_new_query(self) -> None:
        cluster = FakeCluster({("t", 0): 10, ("t", 1): 10, ("t", 2): 4})
        stream = self.stream(cluster, startingOffsets='{"t": {"0": 5, "1": -2}}')
        initial = stream.initialOffset()
        with pytest.raises(SourceOptionError) as caught:
            stream.latestOffset(initial, ReadAllAvailable())
        assert "startingOffsets='t-0=5, t-1=-2'" in str(caught.value)
        assert "must name exactly the partitions being read (t-0, t-1, t-2); missing: t-2;" in str(
            caught.value
        )

    def test_batch_0_planned_here_still_reports_a_partition_deleted_before_it(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Not a replay: this process planned the end, so a partition of the start that is
        not in it was confirmed deleted."""
        monkeypatch.setattr(source_client, "_GONE_CONFIRM_S", 0.0)
        monkeypatch.setattr(source_client, "_GONE_POLL_S", 0.0)
        cluster = FakeCluster({("o-1", 0): 10, ("o-2", 0): 10})
        merged = {**OPTIONS, "subscribePattern": "o-.*"}
        del merged["subscribe"]
        stream = KafkaStreamReader(merged, source_schema(merged))
        stream._planner.kafka._consumer = cluster  # type: ignore[assignment]
        stream._planner.kafka._admin_client = cluster  # type: ignore[assignment]
        stream._planner.kafka._uncommitted = cluster  # type: ignore[assignment]  # no LSO pinned here
        initial = stream.initialOffset()
        cluster.latest = {("o-1", 0): 10}  # o-2 deleted: every answer says so
        end = stream.latestOffset(initial, ReadAllAvailable())
        assert end == {"o-1": {"0": 10}}
        with pytest.raises(DataLossError, match="o-2-0 is gone"):
            stream.partitions(initial, end)
