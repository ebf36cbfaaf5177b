"""Timing and the input model."""

import pytest

from connectors.policy import (
    ClusterFacts,
    ConsumerInput,
    LintInput,
    LintInputError,
    Timing,
    TopicFacts,
)
from connectors.policy.inputs import ClusterSnapshot


def test_timing_defaults_and_window():
    timing = Timing()
    assert timing.commit_window_ms == 10_000 + 60_000 + 300_000
    assert timing.max_checkpoint_age_ms == 86_400_000


def test_negative_timing_is_rejected():
    with pytest.raises(LintInputError, match="max_restart_time_ms"):
        Timing(max_restart_time_ms=-1)


def test_topic_names_from_spark_options():
    lint_input = LintInput(
        sink_options={"topic": "out"},
        output_topics=("audit", "out"),
        source_options={"subscribe": "a, b", "assign": '{"c": [0]}'},
        source_topics=("a",),
    )
    assert lint_input.output_topic_names() == ("audit", "out")
    assert lint_input.source_topic_names() == ("a", "b", "c")


def test_spark_option_names_are_case_insensitive():
    lint_input = LintInput(
        sink_options={"TOPIC": "out"}, source_options={"Subscribe": "a", "ASSIGN": '{"b": [0]}'}
    )
    assert lint_input.output_topic_names() == ("out",)
    assert lint_input.source_topic_names() == ("a", "b")
    assert lint_input.sink_option("topic") == "out" and lint_input.sink_option("missing") is None


def test_bad_assign_json_is_an_input_error():
    with pytest.raises(LintInputError, match="assign"):
        LintInput(source_options={"assign": "orders"}).source_topic_names()


@pytest.mark.parametrize(
    ("consumer", "options", "subscribes"),
    [
        ({}, {"subscribe": "t"}, True),
        ({}, {"subscribePattern": "t.*"}, True),
        ({"group.id": "g"}, {}, True),
        ({"group.id": "g"}, {"assign": "{}"}, False),
        ({}, {}, False),
    ],
)
def test_subscribes(consumer, options, subscribes):
    assert LintInput(consumer=consumer, source_options=options).subscribes() is subscribes


def test_overlay_puts_specific_sources_on_top():
    base = LintInput(
        client="java",
        producer={"delivery.timeout.ms": "1", "acks": "all"},
        downstream_consumers=(ConsumerInput("a", {}),),
        timing=Timing(max_restart_time_ms=1),
    )
    merged = base.overlay(
        producer={"message.timeout.ms": "2"},
        downstream_consumers=(ConsumerInput("b", {}),),
        output_topics=("out",),
        timing_ms={"trigger_interval_ms": 5},
    )
    assert merged.client == "java"
    assert merged.producer == {"acks": "all", "message.timeout.ms": "2"}
    assert [c.name for c in merged.downstream_consumers] == ["a", "b"]
    assert merged.timing == Timing(trigger_interval_ms=5, max_restart_time_ms=1)
    assert merged.broker is None and merged.output_topics == ("out",)


def test_default_broker_only_when_none_given():
    assert LintInput().with_default_broker().broker == {}
    assert LintInput(broker={"a": "1"}).with_default_broker().broker == {"a": "1"}


def test_live_snapshot_wins():
    base = LintInput(
        broker={"transaction.max.timeout.ms": "1"}, cluster=ClusterFacts(3, {"t": TopicFacts(3)})
    )
    snapshot = ClusterSnapshot(
        {"transaction.max.timeout.ms": "2"}, ClusterFacts(1, {"u": TopicFacts(1)})
    )
    merged = base.with_cluster(snapshot)
    assert merged.broker == {"transaction.max.timeout.ms": "2"}
    assert merged.cluster.broker_count == 1
    assert set(merged.cluster.topics) == {"t", "u"}


def test_max_idle_time_default_and_longest_pause():
    assert Timing().max_idle_time_ms == 86_400_000
    assert Timing(max_idle_time_ms=5, max_checkpoint_age_ms=3).max_pause_ms == 5
    assert Timing(max_idle_time_ms=3, max_checkpoint_age_ms=5).max_pause_ms == 5


def test_kafka_eos_source_never_subscribes():
    lint_input = LintInput(
        consumer={"group.id": "g"}, source_options={"subscribe": "t"}, kafka_eos_source=True
    )
    assert lint_input.subscribes() is False


def test_live_missing_topics_replace_file_facts():
    base = LintInput(cluster=ClusterFacts(topics={"t": TopicFacts(3), "u": TopicFacts(3)}))
    snapshot = ClusterSnapshot({}, ClusterFacts(1, missing_topics=frozenset({"t", "v"})))
    merged = base.with_cluster(snapshot).cluster
    assert set(merged.topics) == {"u"}
    assert merged.missing_topics == {"t", "v"}
