"""EOS016: subscribing source consumer with max.poll.interval.ms below the batch."""

from connectors.policy import Timing

LONG_BATCHES = Timing(max_batch_duration_ms=600_000)


def test_subscribe_with_default_interval_and_long_batches_fires(lint):
    [finding] = lint(
        "EOS016", consumer={}, source_options={"subscribe": "orders"}, timing=LONG_BATCHES
    )
    assert finding.severity == "error"
    assert "max.poll.interval.ms=300000 (5m, librdkafka default)" in finding.message
    assert "at least 1200000" in finding.fix


def test_group_id_without_spark_options_means_subscribing(lint):
    assert lint("EOS016", consumer={"group.id": "orders"}, timing=LONG_BATCHES)


def test_assign_does_not_fire(lint):
    source = {"assign": '{"orders": [0]}'}
    assert (
        lint("EOS016", consumer={"group.id": "g"}, source_options=source, timing=LONG_BATCHES) == []
    )


def test_long_enough_interval_passes(lint):
    consumer = {"group.id": "g", "max.poll.interval.ms": "1200000"}
    assert lint("EOS016", consumer=consumer, timing=LONG_BATCHES) == []


def test_default_timing_passes(lint):
    assert lint("EOS016", consumer={"group.id": "g"}) == []


def test_kafka_eos_source_assigns_even_for_subscribe(lint):
    # It joins no group, so max.poll.interval.ms cannot expel it.
    assert (
        lint(
            "EOS016",
            consumer={"group.id": "lag"},
            source_options={"subscribe": "orders"},
            kafka_eos_source=True,
            timing=LONG_BATCHES,
        )
        == []
    )
