"""Check exactly-once end to end: each input record's result is in the output exactly once.

The contract: the pipeline keeps the input record's key on its result. Then exactly once is a
multiset equality of keys: an input key seen ``n`` times in the input topic must be seen
``n`` times in the output topic, as a ``read_committed`` reader sees it. Three kinds of
violation follow:

- missing: fewer copies in the output than in the input (lost results);
- duplicated: more copies than in the input (replayed results);
- unexpected: output keys that no input record has (a foreign writer, or a key-changing
  pipeline that this check does not fit).

>>> report = compare([b"a", b"b", b"c"], [b"a", b"b", b"b"], "in", "out")
>>> report.exactly_once, [m.key for m in report.missing], [m.key for m in report.duplicated]
(False, [b'c'], [b'b'])

Only :func:`verify_topics` talks to Kafka, through :func:`~kafka_eos.operations.drain.drain`.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TypedDict

from confluent_kafka import KafkaException

from checkpoint.errors import KafkaEosError
from kafka_eos.operations.drain import drain

Key = bytes | None
EXAMPLES = 10
"""How many keys of each kind of violation reports show."""


class VerifyInputError(KafkaEosError):
    """A topic could not be read to its end; the message names the option, topic and fix."""

    code = "KAFKA_EOS.OPERATIONS.VERIFY_READ_FAILED"


@dataclass(frozen=True)
class KeyMismatch:
    """A key whose copies in the output differ from its copies in the input."""

    key: Key
    expected: int  # copies in the input
    seen: int  # copies in the output


class MismatchDict(TypedDict):
    key: str | None
    expected: int
    seen: int


class CountDict(TypedDict):
    keys: int  # distinct keys of this kind
    records: int  # records missing or in excess
    examples: list[MismatchDict]  # the first EXAMPLES keys


class VerifyReportDict(TypedDict):
    """JSON form of a report (``kafka-eos verify --json``); version 1."""

    version: int
    input_topic: str
    output_topic: str
    inputs: int
    outputs: int
    missing: CountDict
    duplicated: CountDict
    unexpected: CountDict
    open_transactions: list[str] | None
    exactly_once: bool
    final: bool | None
    passed: bool


@dataclass(frozen=True)
class VerifyReport:
    """Counts and offending keys; ``open_transactions`` is None when they were not checked."""

    input_topic: str
    output_topic: str
    inputs: int
    outputs: int
    missing: tuple[KeyMismatch, ...]
    duplicated: tuple[KeyMismatch, ...]
    unexpected: tuple[KeyMismatch, ...]
    open_transactions: tuple[str, ...] | None = None

    @property
    def exactly_once(self) -> bool:
        return not (self.missing or self.duplicated or self.unexpected)

    @property
    def final(self) -> bool | None:
        """Whether no open transaction can still add to the output; None when not checked."""
        return None if self.open_transactions is None else not self.open_transactions

    @property
    def passed(self) -> bool:
        """Exactly once holds on output that is final, as far as it was checked."""
        return self.exactly_once and self.final is not False

    def with_open_transactions(self, transactional_ids: Iterable[str]) -> VerifyReport:
        return dataclasses.replace(self, open_transactions=tuple(sorted(transactional_ids)))

    def to_dict(self) -> VerifyReportDict:
        return {
            "version": 1,
            "input_topic": self.input_topic,
            "output_topic": self.output_topic,
            "inputs": self.inputs,
            "outputs": self.outputs,
            "missing": _counts(self.missing),
            "duplicated": _counts(self.duplicated),
            "unexpected": _counts(self.unexpected),
            "open_transactions": (
                None if self.open_transactions is None else list(self.open_transactions)
            ),
            "exactly_once": self.exactly_once,
            "final": self.final,
            "passed": self.passed,
        }


def format_key(key: Key) -> str | None:
    """A key for people and JSON: its UTF-8 text, ``0x<hex>`` if it is not text, None if null."""
    if key is None:
        return None
    try:
        text = key.decode("utf-8")
    except UnicodeDecodeError:
        return "0x" + key.hex()
    return text if text.isprintable() else "0x" + key.hex()


def excess(mismatch: KeyMismatch) -> int:
    """Records missing from, or in excess in, the output for this key."""
    return abs(mismatch.seen - mismatch.expected)


def compare(
    input_keys: Iterable[Key], output_keys: Iterable[Key], input_topic: str, output_topic: str
) -> VerifyReport:
    """The multiset comparison; mismatches in first-seen order (input, then output)."""
    expected = Counter(input_keys)
    seen = Counter(output_keys)
    mismatches = [KeyMismatch(k, expected[k], seen[k]) for k in (expected | seen)]
    return VerifyReport(
        input_topic=input_topic,
        output_topic=output_topic,
        inputs=expected.total(),
        outputs=seen.total(),
        missing=tuple(m for m in mismatches if m.seen < m.expected),
        duplicated=tuple(m for m in mismatches if m.seen > m.expected > 0),
        unexpected=tuple(m for m in mismatches if m.expected == 0),
    )


def verify_topics(
    bootstrap_servers: str,
    input_topic: str,
    output_topic: str,
    *,
    timeout_s: float = 60.0,
    config: dict[str, str] | None = None,
) -> VerifyReport:
    """Drain both topics to their current end (``read_committed``) and compare their keys."""
    keys: dict[str, list[Key]] = {}
    for option, topic in (("--input", input_topic), ("--output", output_topic)):
        try:
            records = drain(bootstrap_servers, topic, "read_committed", timeout_s, config)
        except (KafkaException, TimeoutError) as exc:
            raise VerifyInputError(
                f"{option} {topic!r}: reading it from --bootstrap-servers "
                f"{bootstrap_servers!r} failed: {exc}. Check the topic exists, the brokers are "
                "reachable from here and -X gives the cluster's security settings "
                "(security.protocol, sasl.*, ssl.*); raise --timeout for a large topic."
            ) from exc
        keys[option] = [record.key for record in records]
    return compare(keys["--input"], keys["--output"], input_topic, output_topic)


def _counts(mismatches: Sequence[KeyMismatch]) -> CountDict:
    return {
        "keys": len(mismatches),
        "records": sum(excess(m) for m in mismatches),
        "examples": [
            {"key": format_key(m.key), "expected": m.expected, "seen": m.seen}
            for m in mismatches[:EXAMPLES]
        ],
    }
