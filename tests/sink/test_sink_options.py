"""The sink's options: Spark's names, what exactly-once needs, and errors that say the fix.

A job log is often all a user has, so each error must name the option, the value seen and
what to set instead.
"""

from __future__ import annotations

import logging
import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from checkpoint.errors import ConfigError
from connectors.kafka.sink.errors import SinkOptionError
from connectors.kafka.sink.naming import derived_prefix
from connectors.kafka.sink.options import (
    DeliveryGuarantee,
    ExactlyOnceOptions,
    SinkOptions,
    decision_location,
)
from connectors.policy.inputs import Timing

EXACTLY_ONCE = {
    "kafka.bootstrap.servers": "broker1:9092,broker2:9092",
    "topic": "orders-eur",
    "transactionalIdPrefix": "orders-enricher",
    "checkpointLocation": "/checkpoints/orders-enricher",
}


def parse(**changes: str | None) -> SinkOptions:
    """The exactly-once options with ``changes`` applied (None removes an option)."""
    options = {**EXACTLY_ONCE, **changes}
    return SinkOptions.parse({k: v for k, v in options.items() if v is not None})


def error_of(**changes: str | None) -> str:
    with pytest.raises(ConfigError) as caught:
        parse(**changes)
    return str(caught.value)


def test_exactly_once_is_the_default_and_keeps_every_option() -> None:
    sink = parse()
    assert sink.guarantee == DeliveryGuarantee.EXACTLY_ONCE
    assert sink.bootstrap_servers == "broker1:9092,broker2:9092"
    assert sink.topic == "orders-eur"
    assert sink.exactly_once == ExactlyOnceOptions(
        "/checkpoints/orders-enricher", "orders-enricher"
    )
    assert sink.flush_timeout_s == 120.0
    assert sink.commit_timeout_s == 60.0
    assert sink.timing == Timing()


def test_option_names_are_case_insensitive_as_spark_lowercases_them() -> None:
    sink = SinkOptions.parse(
        {
            "KAFKA.BOOTSTRAP.SERVERS": "k:9092",
            "TRANSACTIONALIDPREFIX": "p",
            "checkpointlocation": "/ck",
            "DeliveryGuarantee": "exactly_once",
        }
    )
    assert sink.exactly_once is not None
    assert (sink.bootstrap_servers, sink.exactly_once.transactional_id_prefix) == ("k:9092", "p")


def test_bootstrap_servers_is_required_with_an_example() -> None:
    for missing in (None, ""):
        message = error_of(**{"kafka.bootstrap.servers": missing})
        assert "kafka.bootstrap.servers=" in message and "it is required" in message
        assert ".option('kafka.bootstrap.servers'" in message


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("exactly_once", DeliveryGuarantee.EXACTLY_ONCE),
        ("at_least_once", DeliveryGuarantee.AT_LEAST_ONCE),
        ("AT_LEAST_ONCE", DeliveryGuarantee.AT_LEAST_ONCE),
        ("none", DeliveryGuarantee.NONE),
    ],
)
def test_delivery_guarantee_values(raw: str, expected: DeliveryGuarantee) -> None:
    assert parse(deliveryGuarantee=raw).guarantee == expected


def test_bad_delivery_guarantee_names_the_option_the_value_and_the_allowed_values() -> None:
    message = error_of(deliveryGuarantee="exactly-once")
    assert "deliveryGuarantee='exactly-once'" in message
    for allowed in ("exactly_once", "at_least_once", "none"):
        assert allowed in message


def test_without_a_prefix_one_is_derived_from_the_checkpoint_location() -> None:
    exactly_once = parse(
        transactionalIdPrefix=None, checkpointLocation="s3a://bucket/chk/orders/"
    ).exactly_once
    assert exactly_once is not None and exactly_once.prefix_derived
    assert exactly_once.transactional_id_prefix == derived_prefix("s3://bucket/chk/orders")
    assert exactly_once.transactional_id_prefix.startswith("kafka-eos-orders-")
    given = parse().exactly_once
    assert given is not None and not given.prefix_derived  # the option wins


@pytest.mark.parametrize("guarantee", ["exactly_once", "at_least_once", "none"])
@pytest.mark.parametrize("empty", ["", " "])
def test_an_empty_prefix_is_refused_not_replaced_by_a_derived_one(
    empty: str, guarantee: str
) -> None:
    """An empty value is a mistake (an unset variable), not a request for the default."""
    message = error_of(transactionalIdPrefix=empty, deliveryGuarantee=guarantee)
    assert f"transactionalIdPrefix={empty!r} is not valid: it is empty" in message
    assert "remove the option to derive a prefix" in message


@pytest.mark.parametrize("guarantee", ["at_least_once", "none"])
def test_no_prefix_is_derived_without_transactions(guarantee: str) -> None:
    assert parse(transactionalIdPrefix=None, deliveryGuarantee=guarantee).exactly_once is None


@pytest.mark.parametrize("prefix", ["orders enricher", "orders/eur", "ordérs", "a*b"])
def test_transactional_id_prefix_characters_are_restricted(prefix: str) -> None:
    message = error_of(transactionalIdPrefix=prefix)
    assert f"transactionalIdPrefix={prefix!r}" in message
    assert "letters, digits, '.', '_' and '-'" in message


@pytest.mark.parametrize("prefix", ["orders-enricher", "a.b_c-1", "X"])
def test_transactional_id_prefix_accepts_the_stable_alphabet(prefix: str) -> None:
    exactly_once = parse(transactionalIdPrefix=prefix).exactly_once
    assert exactly_once is not None and exactly_once.transactional_id_prefix == prefix


def test_exactly_once_needs_the_checkpoint_location_on_the_writer() -> None:
    message = error_of(checkpointLocation=None)
    assert ".writeStream.option('checkpointLocation'" in message
    # Why the session default does not help: the fix a user would try first.
    assert "spark.sql.streaming.checkpointLocation is not visible" in message


def test_exactly_once_rejects_a_disabled_idempotent_producer() -> None:
    message = error_of(**{"kafka.enable.idempotence": "False"})
    assert "kafka.enable.idempotence='False'" in message
    assert "remove it" in message
    assert parse(**{"kafka.enable.idempotence": "true"}).guarantee == "exactly_once"


@pytest.mark.parametrize("guarantee", ["at_least_once", "none"])
def test_flushing_guarantees_need_no_prefix_nor_checkpoint(guarantee: str) -> None:
    sink = SinkOptions.parse({"kafka.bootstrap.servers": "k:9092", "deliveryGuarantee": guarantee})
    assert sink.exactly_once is None
    assert sink.topic is None


@pytest.mark.parametrize(
    ("key", "fix"),
    [
        ("transactional.id", "set 'transactionalIdPrefix'"),
        ("key.serializer", "cast the 'key' column to string or binary"),
        ("value.serializer", "cast the 'value' column to string or binary"),
    ],
)
def test_rejected_kafka_keys_say_what_to_do_instead(key: str, fix: str) -> None:
    # Upper case too: Spark lower-cases option names, so a user may write them either way.
    for spelled in (f"kafka.{key}", f"KAFKA.{key.upper()}"):
        message = error_of(**{spelled: "MyValue"})
        assert f"kafka.{key}='MyValue' is not valid: it is not supported" in message
        assert fix in message


def test_rejected_keys_are_reported_before_a_missing_bootstrap() -> None:
    """The more specific error first: fixing the bootstrap alone would not be enough."""
    with pytest.raises(ConfigError, match=r"kafka\.transactional\.id"):
        SinkOptions.parse({"kafka.transactional.id": "t"})


def test_kafka_options_pass_through_to_the_producer_without_their_prefix() -> None:
    sink = parse(
        **{
            "kafka.transaction.timeout.ms": "900000",
            "kafka.Security.Protocol": "SASL_SSL",
            "kafka.sasl.password": "Secret-Value",
        }
    )
    assert sink.producer_config == {
        "bootstrap.servers": "broker1:9092,broker2:9092",
        "transaction.timeout.ms": "900000",
        "security.protocol": "SASL_SSL",  # values keep their case, names do not
        "sasl.password": "Secret-Value",
        "message.max.bytes": "1048527",  # Java's limit, where librdkafka's is smaller
    }


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({}, "1048527"),  # what Spark's sink writes, and the broker's default takes
        ({"kafka.message.max.bytes": "2000"}, "2000"),
        ({"kafka.max.request.size": "4194304"}, "4194304"),  # the Java key, translated
    ],
)
def test_the_record_size_limit_is_javas_unless_an_option_sets_one(
    options: dict[str, str], expected: str
) -> None:
    assert parse(**options).producer_config["message.max.bytes"] == expected


# A record batch's header: 61 bytes. The broker's (and a topic's) default max.message.bytes,
# 1,048,588, bounds a whole batch, header included.
_BATCH_HEADER = 61
_BROKER_DEFAULT_MAX_MESSAGE_BYTES = 1_048_588


def _varint_size(n: int) -> int:
    zigzag = (n << 1) ^ (n >> 63)
    return max(1, (zigzag.bit_length() + 6) // 7)


def _lone_batch_size(value_size: int) -> int:
    """Bytes of a record batch holding one record: no key, no headers, offset and timestamp
    deltas 0."""
    body = 1 + 1 + 1 + _varint_size(-1) + _varint_size(value_size) + value_size + 1
    return _BATCH_HEADER + _varint_size(body) + body


def _accepted(config: dict[str, str], value_size: int) -> bool:
    """Whether librdkafka's producer takes a record of ``value_size`` bytes (no key)."""
    producer = Producer({**config, "bootstrap.servers": "127.0.0.1:9", "log_level": 0})
    try:
        producer.produce("t", value=b"v" * value_size)
    except KafkaException as exc:
        assert exc.args[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
        return False
    finally:
        producer.purge()
    return True


def test_the_default_record_size_limit_fits_the_brokers_default_batch_limit() -> None:
    """Every record the producer takes by default fits, alone in its batch, the broker's
    default limit, and every record Java's producer takes by default is taken: Java's
    max.request.size (1,048,576) counts the batch header and the record's overhead, which
    librdkafka's message.max.bytes check leaves out. Records librdkafka took at 1,048,576
    but the broker refused (values of 1,048,517 to 1,048,540 bytes) failed only at the
    delivery report, saying to raise kafka.message.max.bytes."""
    config = parse().producer_config
    too_large = 1_048_517  # the smallest value whose batch the broker refuses
    assert _lone_batch_size(too_large) == _BROKER_DEFAULT_MAX_MESSAGE_BYTES + 1
    assert not _accepted(config, too_large)
    # Java's upper bound: 61 (batch) + 21 (record) + 1 (null key) + 3 (value length) + 1.
    javas_largest = 1_048_576 - 61 - 21 - 1 - 3 - 1
    assert _accepted(config, javas_largest)


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"triggerInterval": "30s"}, Timing(trigger_interval_ms=30_000)),
        ({"maxBatchDuration": "1h30m"}, Timing(max_batch_duration_ms=5_400_000)),
        ({"maxRestartTime": "2500"}, Timing(max_restart_time_ms=2_500)),
        (
            {"TRIGGERINTERVAL": "1s", "maxbatchduration": "250ms", "MaxRestartTime": "1m"},
            Timing(1_000, 250, 60_000),
        ),
    ],
)
def test_timing_options_are_durations(options: dict[str, str], expected: Timing) -> None:
    assert parse(**options).timing == expected


def test_a_bad_duration_names_the_option_and_the_value() -> None:
    with pytest.raises(SinkOptionError) as caught:
        parse(maxRestartTime="soon")
    message = str(caught.value)
    # As documented, whatever case the user wrote.
    assert "kafka-eos sink option maxRestartTime='soon' is not valid" in message
    assert "30s, 15m or 1h30m" in message  # the fix: how to spell a duration


@pytest.mark.parametrize(
    ("option", "attribute"),
    [("flushTimeoutMs", "flush_timeout_s"), ("commitTimeoutMs", "commit_timeout_s")],
)
def test_flush_and_commit_timeouts_in_milliseconds(option: str, attribute: str) -> None:
    assert getattr(parse(**{option: "2500"}), attribute) == 2.5
    for bad in ("0", "-5", "5s", "1.5", ""):
        message = error_of(**{option: bad})
        assert f"{option}={bad!r} is not valid: expected a positive whole number" in message


@pytest.mark.parametrize(
    ("checkpoint", "expected"),
    [
        ("/checkpoints/q", "/checkpoints/q/kafka-eos-sink"),
        ("/checkpoints/q/", "/checkpoints/q/kafka-eos-sink"),
        ("s3a://bucket/ck/q", "s3a://bucket/ck/q/kafka-eos-sink"),
    ],
)
def test_decisions_live_inside_the_query_checkpoint(checkpoint: str, expected: str) -> None:
    """Inside, so that deleting the checkpoint resets the decisions with it."""
    assert decision_location(checkpoint) == expected
    exactly_once = parse(checkpointLocation=checkpoint).exactly_once
    assert exactly_once is not None and exactly_once.decision_location == expected


def test_an_empty_topic_option_means_no_topic() -> None:
    assert parse(topic="").topic is None


def test_credentials_the_driver_cannot_commit_with_are_refused_at_startup() -> None:
    options = {
        "kafka.bootstrap.servers": "b:9092",
        "transactionalIdPrefix": "p",
        "checkpointLocation": "/tmp/cp",
        "kafka.sasl.mechanism": "OAUTHBEARER",
    }
    with pytest.raises(ConfigError, match=r"sasl\.mechanism = 'OAUTHBEARER'"):
        SinkOptions.parse(options)
    SinkOptions.parse({**options, "deliveryGuarantee": "at_least_once"})  # no admin needed


def test_a_near_miss_of_a_sink_option_fails_with_did_you_mean() -> None:
    message = error_of(transactionalIdPrefx="orders")
    assert "transactionalidprefx='orders'" in message
    assert "did you mean transactionalIdPrefix?" in message
    assert "did you mean deliveryGuarantee?" in error_of(deliveryGuarante="none")


def test_options_of_sparks_kafka_format_are_accepted_on_the_sink_without_a_word(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        parse(includeHeaders="true", failOnDataLoss="false", startingOffsets="earliest")
    assert caplog.text == ""


def test_other_unknown_sink_options_are_warned_about_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    name = f"bogus{uuid.uuid4().hex[:8]}"  # warned once per process: a name never seen
    with caplog.at_level(logging.WARNING):
        parse(**{name: "1"})
        parse(**{name: "1"})
    assert [r.getMessage() for r in caplog.records] == [
        f"kafka-eos sink: unknown option {name!r} is ignored"
    ]
