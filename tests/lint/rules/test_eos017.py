"""EOS017: an exactly-once query whose source starts before latest with no maxOffsetsPerTrigger."""

import pytest

from connectors.policy.registry import run_rules
from kafka_eos.lint.loaders import pipeline_input

PRODUCER = {"transaction.timeout.ms": "900000"}


def eos017(lint, *, source, producer=PRODUCER, sink=None, kafka_eos_source=True):
    return lint(
        "EOS017",
        producer=producer,
        sink_options=sink or {},
        source_options={"subscribe": "orders", **source},
        kafka_eos_source=kafka_eos_source,
    )


def test_earliest_without_max_offsets_fires_with_the_timeout_and_the_way_out(lint):
    [finding] = eos017(lint, source={"startingOffsets": "earliest"})
    assert finding.severity == "warning"
    assert finding.message.startswith(
        "source option startingOffsets=earliest and no maxOffsetsPerTrigger: the first"
        " micro-batch is unbounded"
    )
    assert "may outlive producer transaction.timeout.ms=900000 (15m)" in finding.message
    assert "every restart replays the same logged offsets/0" in finding.message
    assert finding.keys == ("startingOffsets", "transaction.timeout.ms", "maxOffsetsPerTrigger")
    assert finding.values == {"startingOffsets": "earliest", "transaction.timeout.ms": "900000"}
    assert finding.fix.startswith(
        "set the source option maxOffsetsPerTrigger so that one batch fits well within"
        " transaction.timeout.ms=900000"
    )
    assert (
        "stop the query, delete its uncommitted offsets/<N> only when there is no"
        " <checkpoint>/kafka-eos-sink/<N>.snapshot.json (no decision for N), set"
        " maxOffsetsPerTrigger, restart"
    ) in finding.fix


def test_the_timeout_default_is_named_when_the_producer_sets_none(lint):
    [finding] = eos017(lint, source={"startingOffsets": "earliest"}, producer={})
    assert "transaction.timeout.ms=60000 (1m, librdkafka default)" in finding.message


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("startingOffsets", '{"orders": {"0": 23, "1": -2}}'),
        ("startingOffsets", '{"orders": {"0": -1, "1": 5}}'),  # partition 1 starts before latest
        ("startingTimestamp", "1700000000000"),
        ("startingOffsetsByTimestamp", '{"orders": {"0": 1700000000000}}'),
        ("STARTINGOFFSETS", "Earliest"),  # Spark option names are case-insensitive
    ],
)
def test_every_start_before_latest_fires(lint, option, value):
    [finding] = eos017(lint, source={option: value})
    assert f"={value} and no maxOffsetsPerTrigger" in finding.message


def test_a_timestamp_wins_over_starting_offsets_latest_as_in_spark(lint):
    source = {"startingOffsets": "latest", "startingTimestamp": "1700000000000"}
    [finding] = eos017(lint, source=source)
    assert finding.values["startingTimestamp"] == "1700000000000"


@pytest.mark.parametrize(
    "source",
    [
        {},  # a streaming query starts at latest by default
        {"startingOffsets": "latest"},
        {"startingOffsets": " LATEST "},
        {"startingOffsets": '{"orders": {"0": -1, "1": -1}}'},
    ],
)
def test_a_start_at_latest_passes(lint, source):
    assert eos017(lint, source=source) == []


@pytest.mark.parametrize("option", ["maxOffsetsPerTrigger", "maxoffsetspertrigger"])
def test_max_offsets_per_trigger_bounds_the_first_batch(lint, option):
    assert eos017(lint, source={"startingOffsets": "earliest", option: "500000"}) == []


def test_min_offsets_per_trigger_bounds_nothing(lint):
    assert eos017(lint, source={"startingOffsets": "earliest", "minOffsetsPerTrigger": "10"})


@pytest.mark.parametrize("guarantee", ["at_least_once", "none", "AT_LEAST_ONCE"])
def test_a_sink_without_transactions_passes(lint, guarantee):
    sink = {"deliveryGuarantee": guarantee}
    assert eos017(lint, source={"startingOffsets": "earliest"}, sink=sink) == []


def test_an_explicit_exactly_once_sink_fires(lint):
    sink = {"deliveryguarantee": "EXACTLY_ONCE"}
    assert eos017(lint, source={"startingOffsets": "earliest"}, sink=sink)


def test_without_a_sink_producer_it_does_not_fire(lint):
    assert eos017(lint, source={"startingOffsets": "earliest"}, producer=None) == []


def test_only_the_kafka_eos_source_is_checked(lint):
    assert eos017(lint, source={"startingOffsets": "earliest"}, kafka_eos_source=False) == []


def test_pipeline_file_fails_then_passes_with_max_offsets_per_trigger():
    document = {
        "sink": {"topic": "orders-enriched", "kafka.transaction.timeout.ms": 900000},
        "source": {"subscribe": "orders", "startingOffsets": "earliest"},
    }
    [finding] = run_rules(pipeline_input(document), select=["EOS017"])
    assert "producer transaction.timeout.ms=900000 (15m)" in finding.message
    document["source"]["maxOffsetsPerTrigger"] = 500000
    assert run_rules(pipeline_input(document), select=["EOS017"]) == []
