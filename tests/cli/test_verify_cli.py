"""``kafka-eos verify`` through click's runner; the drain and the admin are replaced."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from cli_fakes import FakeAdmin, ongoing
from click.testing import Result

from kafka_eos.commands import verify
from kafka_eos.operations.verify import VerifyInputError, VerifyReport, compare

TOPICS = ("--bootstrap-servers", "broker:9092", "--input", "in", "--output", "out")


@pytest.fixture
def topics(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What the drain "reads": set ``topics["in"]`` and ``topics["out"]`` to key lists."""
    state: dict[str, Any] = {"in": [], "out": [], "calls": []}

    def verify_topics(bootstrap: str, input_topic: str, output_topic: str, **kw: Any):
        state["calls"].append((bootstrap, input_topic, output_topic, kw))
        return compare(state["in"], state["out"], input_topic, output_topic)

    monkeypatch.setattr(verify, "verify_topics", verify_topics)
    return state


@pytest.fixture
def run(invoke: Callable[..., Result]) -> Callable[..., Result]:
    return lambda *args: invoke(verify.command, *args)


def test_exactly_once_exits_zero(run, topics) -> None:
    topics["in"] = topics["out"] = [b"a", b"b"]
    result = run(*TOPICS, "--timeout", "5", "-X", "security.protocol=SSL")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1] == "exactly once holds"
    assert topics["calls"] == [
        ("broker:9092", "in", "out", {"timeout_s": 5.0, "config": {"security.protocol": "SSL"}})
    ]


def test_a_duplicate_exits_one_with_the_key(run, topics) -> None:
    topics["in"], topics["out"] = [b"a", b"b"], [b"a", b"b", b"b"]
    result = run(*TOPICS)
    assert result.exit_code == 1
    assert "duplicated 1 records, 1 keys more than once in the output" in result.stdout
    assert "  key 'b': 2 in the output, 1 in the input" in result.stdout
    assert result.stdout.splitlines()[-1] == "exactly once is VIOLATED"


def test_json_report(run, topics) -> None:
    topics["in"], topics["out"] = [b"a", b"b", None], [b"a", b"z"]
    result = run(*TOPICS, "--json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert (report["inputs"], report["outputs"], report["passed"]) == (3, 2, False)
    assert [e["key"] for e in report["missing"]["examples"]] == ["b", None]
    assert report["unexpected"]["examples"] == [{"key": "z", "expected": 0, "seen": 1}]
    assert report["open_transactions"] is None


def test_open_transactions_of_the_prefix_make_it_not_final(run, topics, monkeypatch) -> None:
    topics["in"] = topics["out"] = [b"a"]
    admin = FakeAdmin([ongoing("orders-3"), ongoing("other-0")])
    seen: list[dict[str, str]] = []

    class Admin:
        def __init__(self, config: dict[str, str], request_timeout_ms: int) -> None:
            seen.append(config)

        def __enter__(self) -> FakeAdmin:
            return admin

        def __exit__(self, *exc_info: object) -> None:
            pass

    monkeypatch.setattr(verify, "TransactionAdmin", Admin)
    result = run(*TOPICS, "--prefix", "orders")
    assert result.exit_code == 1
    assert "open transactions: orders-3: the output is not final" in result.stdout
    assert result.stdout.splitlines()[-1] == "NOT FINAL: exactly once holds so far"
    assert seen == [{"bootstrap.servers": "broker:9092"}]

    admin.transactions.pop("orders-3")
    result = run(*TOPICS, "--prefix", "orders")
    assert result.exit_code == 0
    assert "open transactions: none" in result.stdout


def test_an_unreadable_topic_exits_two_in_one_line(run, monkeypatch) -> None:
    def fail(*args: Any, **kwargs: Any) -> VerifyReport:
        raise VerifyInputError("--input 'in': reading it ... failed: Unknown topic")

    monkeypatch.setattr(verify, "verify_topics", fail)
    result = run(*TOPICS)
    assert result.exit_code == 2
    assert result.stderr == (
        "Error: [KAFKA_EOS.OPERATIONS.VERIFY_READ_FAILED] --input 'in': reading it ... failed: "
        "Unknown topic\n"
    )


def test_under_json_an_unreadable_topic_is_a_json_error(run, monkeypatch) -> None:
    def fail(*args: Any, **kwargs: Any) -> VerifyReport:
        raise VerifyInputError("--input 'in': reading it ... failed: Unknown topic")

    monkeypatch.setattr(verify, "verify_topics", fail)
    result = run(*TOPICS, "--json")
    assert result.exit_code == 2 and result.stderr == ""
    assert json.loads(result.stdout) == {
        "version": 1,
        "error": {
            "code": "KAFKA_EOS.OPERATIONS.VERIFY_READ_FAILED",
            "message": "--input 'in': reading it ... failed: Unknown topic",
        },
    }


def test_both_topics_are_required(run, topics) -> None:
    result = run("--bootstrap-servers", "broker:9092", "--input", "in")
    assert result.exit_code == 2 and "--output" in result.stderr
    assert topics["calls"] == []
