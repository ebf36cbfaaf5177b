"""Option parsing and validation: Spark's names and meanings, and errors that say the fix."""

from __future__ import annotations

import logging
import uuid

import pytest

from checkpoint.errors import ConfigError
from connectors.kafka.source.errors import SourceOptionError
from connectors.kafka.source.options import (
    BoundKind,
    BoundSide,
    SourceOptions,
    Subscription,
    SubscriptionKind,
)

BASE = {"kafka.bootstrap.servers": "k:9092", "subscribe": "orders"}


def parse(streaming: bool = True, **extra: str) -> object:
    return SourceOptions.parse({**BASE, **extra}, streaming=streaming)


def error_of(streaming: bool = True, base: dict[str, str] = BASE, **extra: str) -> str:
    with pytest.raises(SourceOptionError) as caught:
        SourceOptions.parse({**base, **extra}, streaming=streaming)
    return str(caught.value)


def test_defaults_match_spark_except_isolation_level() -> None:
    opts = parse()
    assert (opts.starting.side, opts.starting.kind) == (BoundSide.START, BoundKind.LATEST)
    assert (opts.ending.side, opts.ending.kind) == (BoundSide.END, BoundKind.LATEST)
    assert opts.fail_on_data_loss is True
    assert opts.include_headers is False
    assert opts.max_trigger_delay_s == 900.0
    assert opts.poll_timeout_s == 120.0
    assert opts.group_id_prefix == "spark-kafka-source"
    # The one deliberate difference: Spark (the Java client) defaults to read_uncommitted.
    assert opts.isolation_level == "read_committed"
    assert parse(streaming=False).starting.kind is BoundKind.EARLIEST


def test_option_names_are_case_insensitive() -> None:
    opts = SourceOptions.parse(
        {
            "KAFKA.BOOTSTRAP.SERVERS": "k:9092",
            "SubscribePattern": "ord.*",
            "FAILONDATALOSS": "FALSE",
        },
        streaming=True,
    )
    assert opts.subscription == Subscription(SubscriptionKind.SUBSCRIBE_PATTERN, pattern="ord.*")
    assert opts.fail_on_data_loss is False


def test_subscriptions() -> None:
    assert parse().subscription.kind is SubscriptionKind.SUBSCRIBE
    assert parse().subscription.topics == ("orders",)
    opts = SourceOptions.parse(
        {"kafka.bootstrap.servers": "k", "subscribe": " b, a ,,a"}, streaming=True
    )
    assert opts.subscription.topics == ("a", "b")
    assign = SourceOptions.parse(
        {"kafka.bootstrap.servers": "k", "assign": '{"t": [1, 0], "u": [2]}'}, streaming=True
    )
    assert assign.subscription.kind is SubscriptionKind.ASSIGN
    assert assign.subscription.partitions == (("t", 0), ("t", 1), ("u", 2))
    pattern = Subscription(SubscriptionKind.SUBSCRIBE_PATTERN, pattern="ord.*")
    assert pattern.matches("orders") and not pattern.matches("my-orders")


@pytest.mark.parametrize(
    "options",
    [
        {"kafka.bootstrap.servers": "k"},
        {"kafka.bootstrap.servers": "k", "subscribe": "a", "assign": '{"a":[0]}'},
        {"kafka.bootstrap.servers": "k", "subscribe": "a", "subscribepattern": "a.*"},
    ],
)
def test_exactly_one_subscription(options: dict[str, str]) -> None:
    message = error_of(base=options)
    assert "set exactly one of subscribe" in message


@pytest.mark.parametrize(
    ("key", "value", "names", "fix"),
    [
        ("subscribePattern", "a[", "subscribePattern='a['", "not a regular expression"),
        ("assign", '{"t": 0}', "assign='{\"t\": 0}'", "list of partition numbers"),
        ("assign", "nope", "assign='nope'", "not JSON"),
        ("subscribe", " , ", "subscribe=' , '", "one or more topics"),
    ],
)
def test_bad_subscription_values(key: str, value: str, names: str, fix: str) -> None:
    options = {"kafka.bootstrap.servers": "k", key: value}
    message = error_of(base=options)
    assert names in message and fix in message


def test_bootstrap_servers_required() -> None:
    assert "kafka.bootstrap.servers=None" in error_of(base={"subscribe": "a"})


def test_isolation_level_must_be_known() -> None:
    message = error_of(**{"kafka.isolation.level": "dirty"})
    assert "kafka.isolation.level='dirty'" in message and "read_committed" in message


@pytest.mark.parametrize("key", ["endingOffsets", "endingOffsetsByTimestamp", "endingTimestamp"])
def test_ending_offsets_are_for_batch_queries(key: str) -> None:
    message = error_of(**{key: "latest"})
    assert f"{key}='latest'" in message and "availableNow" in message


def test_batch_cannot_start_at_latest_or_end_at_earliest() -> None:
    assert "use earliest" in error_of(streaming=False, startingOffsets="latest")
    assert "use latest" in error_of(streaming=False, endingOffsets="earliest")
    message = error_of(streaming=False, startingOffsets='{"orders": {"0": -1}}')
    assert "offset -1 of orders-0" in message and "-2 (earliest)" in message
    message = error_of(streaming=False, endingOffsets='{"orders": {"0": -2}}')
    assert "offset -2 of orders-0" in message


def test_offset_json_options() -> None:
    opts = parse(startingOffsets='{"orders": {"0": 5, "1": -2}}')
    assert opts.starting.kind is BoundKind.OFFSETS
    assert opts.starting.offsets == {("orders", 0): 5, ("orders", 1): -2}
    assert "not JSON" in error_of(startingOffsets="{oops")
    assert "expected a JSON object" in error_of(startingOffsets='{"orders": [0]}')
    assert "must be >= 0" in error_of(startingOffsets='{"orders": {"0": -7}}')


def test_timestamp_options_and_spark_precedence(caplog: pytest.LogCaptureFixture) -> None:
    by_partition = parse(startingOffsetsByTimestamp='{"orders": {"0": 1000}}')
    assert by_partition.starting.kind is BoundKind.TIMESTAMPS
    with caplog.at_level(logging.WARNING):
        opts = parse(
            startingTimestamp="2000",
            startingOffsetsByTimestamp='{"orders": {"0": 1000}}',
            startingOffsets="earliest",
        )
    assert (opts.starting.kind, opts.starting.timestamp) == (BoundKind.TIMESTAMP, 2000)
    assert "startingTimestamp wins" in caplog.text
    batch = parse(streaming=False, endingTimestamp="3000")
    assert (batch.ending.side, batch.ending.kind) == (BoundSide.END, BoundKind.TIMESTAMP)
    assert batch.ending.timestamp == 3000
    ending = parse(streaming=False, endingOffsetsByTimestamp='{"orders": {"0": 1000}}').ending
    assert (ending.side, ending.kind) == (BoundSide.END, BoundKind.TIMESTAMPS)
    assert "milliseconds since the epoch" in error_of(startingTimestamp="yesterday")
    assert "expected one of error, latest" in error_of(startingOffsetsByTimestampStrategy="nearest")


def test_numbers_booleans_and_durations() -> None:
    opts = parse(
        maxOffsetsPerTrigger="1000",
        minOffsetsPerTrigger="10",
        maxTriggerDelay="30s",
        minPartitions="8",
        maxRecordsPerPartition="500",
        includeHeaders="TRUE",
        **{"kafkaConsumer.pollTimeoutMs": "5000"},
    )
    assert (opts.max_offsets_per_trigger, opts.min_offsets_per_trigger) == (1000, 10)
    assert (opts.max_trigger_delay_s, opts.min_partitions) == (30.0, 8)
    assert (opts.max_records_per_partition, opts.include_headers) == (500, True)
    assert opts.poll_timeout_s == 5.0
    assert parse(maxTriggerDelay="250").max_trigger_delay_s == 0.25
    assert parse(maxTriggerDelay="2h").max_trigger_delay_s == 7200.0
    assert "positive whole number" in error_of(maxOffsetsPerTrigger="-5")
    assert "positive whole number" in error_of(minPartitions="0")
    assert "true or false" in error_of(failOnDataLoss="yes")
    assert "duration such as" in error_of(maxTriggerDelay="soon")


def test_min_above_max_offsets_per_trigger_contradicts() -> None:
    message = error_of(minOffsetsPerTrigger="500", maxOffsetsPerTrigger="100")
    assert "minOffsetsPerTrigger='500'" in message
    assert "above maxOffsetsPerTrigger=100" in message


def test_unknown_options_are_warned_about_once_not_fatal(caplog: pytest.LogCaptureFixture) -> None:
    name = f"bogus{uuid.uuid4().hex[:8]}"  # warned once per process: a name never seen
    with caplog.at_level(logging.WARNING):
        parse(**{name: "1"})
        parse(**{name: "1"})
    assert [r.getMessage() for r in caplog.records] == [
        f"kafka-eos source: unknown option {name!r} is ignored"
    ]


def test_a_near_miss_of_an_option_fails_with_did_you_mean() -> None:
    message = error_of(startingOffset="earliest")
    assert "startingoffset='earliest'" in message
    assert "did you mean startingOffsets?" in message
    assert "did you mean maxOffsetsPerTrigger?" in error_of(maxOffsetPerTrigger="10")


def test_spark_sink_options_are_accepted_on_the_source_as_spark_does(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        parse(topic="orders", path="/ignored")
    assert caplog.text == ""


def test_a_misspelt_offsets_keyword_suggests_the_keyword() -> None:
    message = error_of(startingOffsets="earlist")
    assert "startingOffsets='earlist'" in message
    assert "did you mean earliest?" in message
    batch = error_of(streaming=False, endingOffsets="latset")
    assert "did you mean latest?" in batch


@pytest.mark.parametrize("option", ["fetchOffset.numRetries", "fetchOffset.retryIntervalMs"])
def test_spark_retry_options_are_checked(option: str) -> None:
    """Spark reads them as numbers when it plans, so ``banana`` fails there too."""
    message = error_of(**{option: "banana"})
    assert f"{option}='banana' is not valid" in message


def test_spark_retry_options_are_accepted_and_said_to_be_unused(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, logger="connectors.kafka.source.options"):
        parse(**{"fetchOffset.numRetries": "5", "fetchOffset.retryIntervalMs": "2000"})
    assert (
        "fetchOffset.numRetries, fetchOffset.retryIntervalMs accepted and not used" in caplog.text
    )
    assert "unknown option" not in caplog.text


def test_option_errors_are_config_errors() -> None:
    """Callers can catch every configuration mistake of the project with one class."""
    with pytest.raises(ConfigError):
        parse(maxOffsetsPerTrigger="many")
