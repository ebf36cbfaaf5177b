"""The one option grammar: durations, whole numbers, booleans and choices, read the same by the
source, the sink and the linter."""

import pytest

from connectors.kafka.sink.errors import SinkOptionError
from connectors.kafka.source.errors import SourceOptionError
from connectors.options import (
    OptionError,
    OptionReader,
    boolean,
    choice,
    duration_ms,
    format_duration,
    positive_int,
)
from connectors.policy.errors import LintOptionError


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("30s", 30_000),
        ("5m", 300_000),
        ("15min", 900_000),  # Spark's time strings
        ("2 min", 120_000),
        ("1h", 3_600_000),
        ("7d", 604_800_000),
        ("250ms", 250),
        ("1500us", 2),
        ("60000", 60_000),  # a bare number is milliseconds
        (" 1h30m ", 5_400_000),
        ("1.5s", 1_500),
        ("1H", 3_600_000),
        (42, 42),
    ],
)
def test_durations(text, ms):
    assert duration_ms("x", text) == ms


@pytest.mark.parametrize("text", ["", "5 minutes", "-5s", "1w", "s", "5m garbage", "9e5"])
def test_a_bad_duration_names_the_option_the_value_and_the_grammar(text):
    with pytest.raises(OptionError) as caught:
        duration_ms("maxTriggerDelay", text)
    message = str(caught.value)
    assert f"maxTriggerDelay={text!r} is not valid" in message
    assert "a bare whole number is milliseconds" in message


@pytest.mark.parametrize(
    ("ms", "text"),
    [(250, "250ms"), (370_000, "6m10s"), (3_600_000, "1h"), (90_061_001, "1d1h1m1s1ms")],
)
def test_format_duration_is_read_back(ms, text):
    assert format_duration(ms) == text
    assert duration_ms("x", text) == ms


@pytest.mark.parametrize("text", ["0", "-5", "5s", "1.5", "", "9e5"])
def test_positive_int_refuses(text):
    with pytest.raises(OptionError, match=r"expected a positive whole number, e\.g\. 7"):
        positive_int("n", text, example="7")


def test_boolean_and_choice():
    assert boolean("b", " TRUE ") is True and boolean("b", "false") is False
    with pytest.raises(OptionError, match="expected true or false"):
        boolean("b", "yes")
    assert choice("c", "Latest", ("error", "latest")) == "latest"
    with pytest.raises(OptionError, match="expected one of error, latest"):
        choice("c", "earliest", ("error", "latest"))


def test_each_side_names_itself_and_is_one_option_error():
    sides = ((SourceOptionError, "source"), (SinkOptionError, "sink"), (LintOptionError, "lint"))
    for error, side in sides:
        reader = OptionReader.of({"MaxTriggerDelay": "soon"}, error)
        with pytest.raises(error) as caught:
            reader.duration_ms("maxTriggerDelay", "15m")
        assert isinstance(caught.value, OptionError)
        assert f"kafka-eos {side} option maxTriggerDelay='soon'" in str(caught.value)
        assert (caught.value.option, caught.value.value) == ("maxTriggerDelay", "soon")


def test_the_reader_is_case_insensitive_and_keeps_defaults():
    reader = OptionReader.of({"FailOnDataLoss": "false", "minPartitions": "4"})
    assert reader.boolean("failOnDataLoss", True) is False
    assert reader.boolean("includeHeaders", False) is False
    assert reader.positive_int("MINPARTITIONS") == 4
    assert reader.positive_int("maxOffsetsPerTrigger") is None
    assert reader.duration_ms("maxTriggerDelay", "15m") == 900_000
    with pytest.raises(OptionError, match=r"it is required, e\.g\. k:9092"):
        reader.required("kafka.bootstrap.servers", "k:9092")


@pytest.mark.parametrize("text", ["²", "1²", "٣"])
def test_digits_that_are_not_ascii_are_option_errors_not_crashes(text):
    """str.isdigit() takes them and int() does not."""
    with pytest.raises(OptionError):
        duration_ms("maxTriggerDelay", text)
    with pytest.raises(OptionError):
        positive_int("minPartitions", text)
