"""Shared helpers for the linter's unit tests. None needs a broker."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from connectors.policy import Finding, LintInput, run_rules
from kafka_eos.commands.lint import command

REPO = Path(__file__).resolve().parents[2]
SCHEMA_PATH = REPO / "docs" / "lint" / "schema.json"

LintRule = Callable[..., list[Finding]]


@pytest.fixture
def lint() -> LintRule:
    """``lint("EOS001", producer={...}, broker={...})``: findings of that one rule."""

    def run(rule_id: str, **fields: Any) -> list[Finding]:
        findings = run_rules(LintInput(**fields), select=[rule_id])
        assert all(f.rule == rule_id for f in findings)
        return findings

    return run


@pytest.fixture
def refused_source_option(lint: LintRule) -> Callable[[str, str, str], Finding]:
    """``refused_source_option("EOS013", "enable.auto.commit", "false")``: the one finding of
    the rule for the kafka-eos source's option ``kafka.<key>=<value>``, which the source
    refuses at startup; checked to say so and to give the option's removal as the fix."""

    def run(rule_id: str, key: str, value: str) -> Finding:
        [finding] = lint(
            rule_id,
            consumer={},
            source_options={f"kafka.{key}": value},
            kafka_eos_source=True,
        )
        assert f"source option kafka.{key}={value}" in finding.message
        assert "refuses this option" in finding.message
        assert finding.fix.startswith(f"remove kafka.{key}")
        assert f"set {key}" not in finding.fix
        return finding

    return run


@pytest.fixture
def cli() -> Callable[..., Result]:
    """Invoke ``kafka-eos lint`` with click's runner (stdout only, never a TTY)."""
    runner = CliRunner()

    def invoke(*args: str) -> Result:
        return runner.invoke(command, list(args), catch_exceptions=False)

    return invoke


@pytest.fixture
def write(tmp_path: Path) -> Callable[[str, str], str]:
    """Write ``text`` to ``tmp_path / name`` and return the path as a string."""

    def put(name: str, text: str) -> str:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return str(path)

    return put


def schema_errors(
    instance: Any, schema: dict[str, Any], root: dict[str, Any], at: str = "$"
) -> list[str]:
    """Validate the JSON Schema subset ``docs/lint/schema.json`` uses (no jsonschema here)."""
    if "$ref" in schema:
        target: Any = root
        for part in schema["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        return schema_errors(instance, target, root, at)
    errors = []
    kinds = {"object": dict, "array": list, "string": str, "integer": int}
    kind = schema.get("type")
    if kind and (
        not isinstance(instance, kinds[kind]) or (kind == "integer" and isinstance(instance, bool))
    ):
        return [f"{at}: expected {kind}"]
    if "const" in schema and instance != schema["const"]:
        errors.append(f"{at}: expected {schema['const']!r}")
    if "enum" in schema and instance not in schema["enum"]:
        errors.append(f"{at}: {instance!r} not in {schema['enum']}")
    if "pattern" in schema and not re.search(schema["pattern"], instance):
        errors.append(f"{at}: {instance!r} does not match {schema['pattern']}")
    if "minimum" in schema and instance < schema["minimum"]:
        errors.append(f"{at}: below {schema['minimum']}")
    if isinstance(instance, dict):
        errors += [
            f"{at}: missing {key}" for key in schema.get("required", []) if key not in instance
        ]
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, value in instance.items():
            if key in properties:
                errors += schema_errors(value, properties[key], root, f"{at}.{key}")
            elif extra is False:
                errors.append(f"{at}: unexpected {key}")
            elif isinstance(extra, dict):
                errors += schema_errors(value, extra, root, f"{at}.{key}")
    if isinstance(instance, list) and "items" in schema:
        for index, item in enumerate(instance):
            errors += schema_errors(item, schema["items"], root, f"{at}[{index}]")
    return errors


@pytest.fixture(scope="session")
def report_schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


@pytest.fixture
def validate(report_schema: dict[str, Any]) -> Callable[[Any], list[str]]:
    """Errors of a JSON report against ``docs/lint/schema.json``; empty when valid."""
    return lambda instance: schema_errors(instance, report_schema, report_schema)
