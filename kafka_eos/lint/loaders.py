"""Read inputs from disk: Java ``.properties`` files and YAML/JSON pipeline files.

Errors name the file, the line or section and the key, never a value: these files hold
credentials, and a parse error echoed into a CI log must not leak one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any, cast

import yaml

from connectors.kafka_keys import JAVA_KEYS, SOURCE, KeyRefused, java_translation
from connectors.options import duration_ms
from connectors.policy.client_keys import CLIENTS, DEFAULT_CLIENT, Client, merge_configs
from connectors.policy.errors import LintInputError, LintOptionError
from connectors.policy.inputs import (
    TIMING_NAMES,
    ClusterFacts,
    ConsumerInput,
    LintInput,
    Timing,
    TopicFacts,
    config_value,
)

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_UNICODE_ESCAPE = re.compile(r"[0-9a-fA-F]{4}")
_PIPELINE_KEYS = (
    "client",
    "producer",
    "consumer",
    "downstream_consumers",
    "broker",
    "sink",
    "source",
    "output_topics",
    "source_topics",
    "timing",
    "cluster",
    "rule_options",
)
_SPARK_KAFKA_PREFIX = "kafka."


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LintInputError(f"{path}: cannot read: {exc.__class__.__name__}") from exc


def parse_properties(text: str, *, source: str = "<properties>") -> dict[str, str]:
    """Parse Java ``.properties`` text: ``=``/``:``/space separators, ``#``/``!`` comments,
    backslash continuations and escapes. The last duplicate wins, as in Java."""
    result: dict[str, str] = {}
    for number, line in _logical_lines(text):
        key, value = _split_entry(line, f"{source}:{number}")
        if not key:
            raise LintInputError(f"{source}:{number}: entry has no key")
        result[key] = value
    return result


def load_properties(path: str | Path) -> dict[str, str]:
    """Read a Java ``.properties`` file (producer, consumer or broker config)."""
    path = Path(path)
    return parse_properties(_read_text(path), source=str(path))


def _logical_lines(text: str) -> Iterable[tuple[int, str]]:
    """Non-comment logical lines with their first physical line number."""
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.lstrip() if pending else raw.strip()
        if not pending:
            if not line or line[0] in "#!":
                continue
            start = number
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2:
            pending += line[:-1]
            continue
        yield start, pending + line
        pending = ""
    if pending:
        yield start, pending


def _split_entry(line: str, where: str) -> tuple[str, str]:
    """Split a logical line at the first unescaped separator and unescape both halves."""
    index, escaped = 0, False
    while index < len(line):
        char = line[index]
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in "=: \t\f":
            break
        index += 1
    key, rest = line[:index], line[index:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    key = _unescape(key, f"{where}: the key")
    return key, _unescape(rest, f"{where}: the value of {key}")


def _unescape(text: str, where: str) -> str:
    """Resolve backslash escapes; a malformed ``\\uXXXX`` is an error, as in Java.

    The error names where, never the text: it may be a password.
    """
    out, index = [], 0
    while index < len(text):
        char = text[index]
        if char != "\\" or index + 1 == len(text):
            out.append(char)
            index += 1
            continue
        nxt = text[index + 1]
        if nxt == "u":
            digits = text[index + 2 : index + 6]
            if not _UNICODE_ESCAPE.fullmatch(digits):
                raise LintInputError(
                    f"{where} has a malformed \\uXXXX escape (expected 4 hex digits after"
                    " \\u; write a literal backslash as \\\\)"
                )
            out.append(chr(int(digits, 16)))
            index += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        index += 2
    return "".join(out)


def parse_kafka_options(pairs: Iterable[str]) -> dict[str, str]:
    """``key=value`` pairs (``-X``) for the live AdminClient; a ``kafka.`` prefix is dropped
    so Spark-style ``kafka.security.protocol=SSL`` works too."""
    options: dict[str, str] = {}
    for number, pair in enumerate(pairs, start=1):
        key, sep, value = pair.partition("=")
        key = key.strip().removeprefix(_SPARK_KAFKA_PREFIX)
        if not sep or not key:
            # Do not echo the pair: a mistyped "sasl.password:..." would leak the password.
            raise LintInputError(f"kafka option #{number}: expected KEY=VALUE")
        options[key] = value
    return options


def load_pipeline(path: str | Path) -> LintInput:
    """Read a YAML or JSON pipeline file (see ``docs/lint.md`` for its sections).

    A Python job is refused by name: read as YAML, its first line is a string, and "expected
    a mapping" would not tell the user that the linter does not read code.
    """
    path = Path(path)
    if path.suffix == ".py":
        raise LintInputError(
            f"{path}: a Python file is not read; --config takes a pipeline file, YAML or JSON "
            "(docs/lint.md, 'Pipeline file'). To lint a job, copy its .option(...) values "
            "into the file's sink: and source: sections, or pass its clients' .properties "
            "with --producer-config and --consumer-config"
        )
    text = _read_text(path)
    try:
        document = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        raise LintInputError(f"{path}: not valid JSON (line {exc.lineno})") from exc
    except yaml.YAMLError as exc:
        # Only the position: the parser's own message quotes the offending line.
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else "?"
        raise LintInputError(f"{path}: not valid YAML (line {line})") from exc
    return pipeline_input(document if document is not None else {}, source=str(path))


def pipeline_input(document: object, *, source: str = "<pipeline>") -> LintInput:
    """Build a ``LintInput`` from a parsed pipeline document, checking every section."""
    expected = ", ".join(_PIPELINE_KEYS)
    if not isinstance(document, Mapping):
        raise LintInputError(
            f"{source}: not a pipeline file: its top level is a {type(document).__name__}, "
            f"where a pipeline file (YAML or JSON) maps section names ({expected}) to their "
            "settings; see docs/lint.md, 'Pipeline file'"
        )
    doc = cast(Mapping[str, Any], document)
    unknown = sorted(set(doc) - set(_PIPELINE_KEYS))
    if unknown:
        raise LintInputError(
            f"{source}: unknown section(s) {', '.join(unknown)}; expected {expected}"
        )
    # The Java-client keys stay Spark options, which EOS018 reports; the rules see the
    # librdkafka keys they become, as the connectors run them.
    sink_kafka, sink_options = _split_spark(
        _flat(doc.get("sink"), f"{source}: sink"), keep=JAVA_KEYS
    )
    # The kafka-eos source refuses some kafka.* options; they stay source options, which
    # rules report, instead of passing for client config the source would run with.
    source_kafka, source_options = _split_spark(
        _flat(doc.get("source"), f"{source}: source"), keep={*SOURCE.refused, *JAVA_KEYS}
    )
    producer = _optional_flat(doc, "producer", source)
    consumer = _optional_flat(doc, "consumer", source)
    return LintInput(
        client=_client(doc.get("client"), source),
        # A sink/source section means that client exists, even with no kafka.* option; its
        # kafka.* options are what actually runs, so they win over the plain section.
        producer=merge_configs(producer, sink_kafka if "sink" in doc else None),
        consumer=merge_configs(consumer, source_kafka if "source" in doc else None),
        kafka_eos_source="source" in doc,
        kafka_eos_sink="sink" in doc,
        downstream_consumers=_downstream(doc.get("downstream_consumers"), source),
        broker=_optional_flat(doc, "broker", source),
        sink_options=sink_options,
        source_options=source_options,
        output_topics=_names(doc.get("output_topics"), f"{source}: output_topics"),
        source_topics=_names(doc.get("source_topics"), f"{source}: source_topics"),
        timing=_timing(doc.get("timing"), source),
        cluster=_cluster(doc.get("cluster"), source),
        rule_options=_rule_options(doc.get("rule_options"), source),
    )


def _mapping(value: object, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise LintInputError(f"{where}: expected a mapping, got {type(value).__name__}")
    return cast(Mapping[str, Any], value)


def _scalar(value: object, where: str) -> str:
    text = config_value(value)
    if text is None:
        raise LintInputError(f"{where}: expected a single value, got {type(value).__name__}")
    return text


def _flat(value: object, where: str) -> dict[str, str]:
    return {str(k): _scalar(v, f"{where}.{k}") for k, v in _mapping(value, where).items()}


def _optional_flat(doc: Mapping[str, Any], section: str, source: str) -> dict[str, str] | None:
    return _flat(doc[section], f"{source}: {section}") if section in doc else None


def _split_spark(
    options: Mapping[str, str], *, keep: Collection[str] = ()
) -> tuple[dict[str, str], dict[str, str]]:
    """Spark options into (``kafka.*`` client config without the prefix, the other options);
    ``kafka.*`` keys named in ``keep`` stay with the other options. Java-client keys kept
    there are also in the client config as the librdkafka keys the connectors translate
    them to (:mod:`connectors.kafka_keys`)."""
    # Spark matches option names case-insensitively and hands kafka.* keys on lowercased.
    prefix = len(_SPARK_KAFKA_PREFIX)
    kafka: dict[str, str] = {}
    other: dict[str, str] = {}
    java: dict[str, str] = {}
    for key, value in options.items():
        name = key[prefix:].lower()
        if not key.lower().startswith(_SPARK_KAFKA_PREFIX) or name in keep:
            other[key] = value
            java.update({name: value} if name in JAVA_KEYS else {})
        else:
            kafka[name] = value
    section = {**kafka, **java}
    for name, value in java.items():
        try:
            kafka.update(java_translation(name, value, section))
        except KeyRefused:
            continue  # refused at startup, and reported by EOS018
    return kafka, other


def _client(value: object, source: str) -> Client:
    if value is None:
        return DEFAULT_CLIENT
    if value not in CLIENTS:
        raise LintInputError(f"{source}: client={value!r}; expected one of {', '.join(CLIENTS)}")
    return cast(Client, value)


def _names(value: object, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise LintInputError(f"{where}: expected a list of topic names")
    return tuple(_scalar(v, where) for v in value)


def _downstream(value: object, source: str) -> tuple[ConsumerInput, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise LintInputError(f"{source}: downstream_consumers: expected a list")
    consumers = []
    for index, entry in enumerate(value):
        where = f"{source}: downstream_consumers[{index}]"
        item = _mapping(entry, where)
        if "config" not in item:
            raise LintInputError(f"{where}: expected name, config and optionally client")
        client = _client(item["client"], where) if "client" in item else None
        name = _scalar(item.get("name", f"#{index + 1}"), f"{where}.name")
        consumers.append(ConsumerInput(name, _flat(item["config"], f"{where}.config"), client))
    return tuple(consumers)


def _timing(value: object, source: str) -> Timing:
    where = f"{source}: timing"
    timing = _mapping(value, where)
    unknown = sorted(set(timing) - set(TIMING_NAMES))
    if unknown:
        raise LintInputError(
            f"{where}: unknown {', '.join(unknown)}; expected {', '.join(TIMING_NAMES)}"
        )
    return Timing(
        **{
            TIMING_NAMES[name]: duration_ms(
                f"{where}.{name}", _scalar(raw, where), error=LintOptionError
            )
            for name, raw in timing.items()
        }
    )


def _cluster(value: object, source: str) -> ClusterFacts:
    where = f"{source}: cluster"
    cluster = _mapping(value, where)
    topics = {}
    for name, raw in _mapping(cluster.get("topics"), f"{where}.topics").items():
        topic = _mapping(raw, f"{where}.topics.{name}")
        rf = topic.get("replication_factor")
        topics[str(name)] = TopicFacts(
            replication_factor=_count(rf, f"{where}.topics.{name}.replication_factor"),
            config=_flat(topic.get("config"), f"{where}.topics.{name}.config"),
        )
    return ClusterFacts(_count(cluster.get("broker_count"), f"{where}.broker_count"), topics)


def _count(value: object, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise LintInputError(f"{where}: expected a positive integer")
    return value


def _rule_options(value: object, source: str) -> dict[str, dict[str, float]]:
    where = f"{source}: rule_options"
    options: dict[str, dict[str, float]] = {}
    for rule, raw in _mapping(value, where).items():
        for name, number in _mapping(raw, f"{where}.{rule}").items():
            if isinstance(number, bool) or not isinstance(number, int | float):
                raise LintInputError(f"{where}.{rule}.{name}: expected a number")
            options.setdefault(str(rule), {})[str(name)] = float(number)
    return options
