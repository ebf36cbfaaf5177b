"""The exactly-once check as a multiset comparison of record keys; no broker."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import KafkaError, KafkaException

from kafka_eos.operations import verify
from kafka_eos.operations.drain import DrainedRecord
from kafka_eos.operations.verify import EXAMPLES, KeyMismatch, VerifyInputError, compare, format_key


def keys(*names: str) -> list[bytes]:
    return [name.encode() for name in names]


def test_each_input_key_once_in_the_output_holds() -> None:
    report = compare(keys("a", "b", "c"), keys("c", "a", "b"), "in", "out")
    assert report.exactly_once and report.passed
    assert (report.inputs, report.outputs) == (3, 3)
    assert report.final is None  # open transactions were not checked


def test_a_replayed_result_is_a_duplicate() -> None:
    report = compare(keys("a", "b"), keys("a", "b", "b", "b"), "in", "out")
    assert report.duplicated == (KeyMismatch(b"b", 1, 3),)
    assert not report.missing and not report.unexpected and not report.passed
    assert report.to_dict()["duplicated"]["records"] == 2


def test_a_lost_result_is_missing() -> None:
    report = compare(keys("a", "b", "c"), keys("a"), "in", "out")
    assert [m.key for m in report.missing] == [b"b", b"c"]
    assert report.to_dict()["missing"] == {
        "keys": 2,
        "records": 2,
        "examples": [
            {"key": "b", "expected": 1, "seen": 0},
            {"key": "c", "expected": 1, "seen": 0},
        ],
    }


def test_an_output_key_without_input_is_unexpected() -> None:
    report = compare(keys("a"), keys("a", "z"), "in", "out")
    assert report.unexpected == (KeyMismatch(b"z", 0, 1),)
    assert not report.exactly_once


def test_repeated_input_keys_must_be_repeated_as_often() -> None:
    assert compare(keys("a", "a"), keys("a", "a"), "in", "out").exactly_once
    assert compare(keys("a", "a"), keys("a"), "in", "out").missing == (KeyMismatch(b"a", 2, 1),)
    too_many = compare(keys("a", "a"), keys("a", "a", "a"), "in", "out")
    assert too_many.duplicated == (KeyMismatch(b"a", 2, 3),)


def test_null_keys_are_counted_like_any_key() -> None:
    report = compare([None, b"a"], [b"a"], "in", "out")
    assert report.missing == (KeyMismatch(None, 1, 0),)
    assert report.to_dict()["missing"]["examples"][0]["key"] is None


def test_open_transactions_make_the_output_not_final() -> None:
    report = compare(keys("a"), keys("a"), "in", "out").with_open_transactions(["orders-1"])
    assert report.exactly_once and report.final is False and not report.passed
    closed = compare(keys("a"), keys("a"), "in", "out").with_open_transactions([])
    assert closed.final is True and closed.passed


def test_json_shows_only_the_first_examples_but_counts_all() -> None:
    inputs = [f"k{i:03}".encode() for i in range(EXAMPLES + 5)]
    document = compare(inputs, [], "in", "out").to_dict()
    assert document["missing"]["keys"] == EXAMPLES + 5
    assert len(document["missing"]["examples"]) == EXAMPLES
    assert document["missing"]["examples"][0]["key"] == "k000"
    assert json.loads(json.dumps(document)) == document


@pytest.mark.parametrize(
    ("key", "shown"),
    [(b"order-1", "order-1"), (b"\xff\x00", "0xff00"), (b"a\nb", "0x610a62"), (None, None)],
)
def test_format_key(key: bytes | None, shown: str | None) -> None:
    assert format_key(key) == shown


def test_verify_topics_names_the_option_of_an_unreadable_topic(monkeypatch) -> None:
    def drain(bootstrap: str, topic: str, *args: object) -> list[DrainedRecord]:
        if topic == "out":
            raise KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))
        return [DrainedRecord(topic, 0, 0, b"a", b"1")]

    monkeypatch.setattr(verify, "drain", drain)
    with pytest.raises(VerifyInputError) as error:
        verify.verify_topics("broker:9092", "in", "out")
    message = str(error.value)
    assert message.startswith(
        "[KAFKA_EOS.OPERATIONS.VERIFY_READ_FAILED] --output 'out': reading it from "
        "--bootstrap-servers 'broker:9092'"
    )
    assert "UNKNOWN_TOPIC_OR_PART" in message and "topic exists" in message


def test_verify_topics_compares_the_keys_it_drained(monkeypatch) -> None:
    drained = {"in": [b"a", b"b"], "out": [b"b", b"a", b"a"]}
    monkeypatch.setattr(
        verify,
        "drain",
        lambda bootstrap, topic, isolation, timeout_s, config: (
            [
                DrainedRecord(topic, 0, offset, key, None)
                for offset, key in enumerate(drained[topic])
            ]
            if isolation == "read_committed"
            else []
        ),
    )
    report = verify.verify_topics("broker:9092", "in", "out")
    assert report.duplicated == (KeyMismatch(b"a", 1, 2),) and report.outputs == 3
