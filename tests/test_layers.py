"""The layers the tree shows hold in the imports: ``kafka_eos`` -> ``connectors`` ->
``checkpoint``, the runtime never imports the linter's front end, and the policy the linter
reads needs no Kafka client."""

from __future__ import annotations

import ast
import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CLIENTS = ("confluent_kafka", "kafka", "pyspark")


def imports_of(path: Path) -> list[str]:
    """Every absolute import of a file, inside functions and ``TYPE_CHECKING`` blocks too."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


def files(*parts: str) -> list[Path]:
    target = ROOT.joinpath(*parts)
    return [target] if target.suffix == ".py" else sorted(target.rglob("*.py"))


def offending(paths: list[Path], forbidden: tuple[str, ...]) -> dict[str, list[str]]:
    found = {}
    for path in paths:
        bad = [
            n for n in imports_of(path) if any(n == f or n.startswith(f + ".") for f in forbidden)
        ]
        if bad:
            found[str(path.relative_to(ROOT))] = bad
    return found


@pytest.mark.parametrize(
    ("where", "forbidden"),
    [
        # The engine-neutral core: no Kafka, no Spark, nothing above it.
        (("checkpoint",), ("connectors", "kafka_eos", *CLIENTS, "py4j")),
        (("connectors",), ("kafka_eos",)),
        (("connectors", "policy"), CLIENTS),
        (("connectors", "kafka_keys.py"), CLIENTS),
        (("connectors", "options.py"), (*CLIENTS, "connectors.policy")),
        (("connectors", "kafka", "source"), ("connectors.kafka.sink", "connectors.spark")),
        (("connectors", "kafka", "sink"), ("connectors.kafka.source", "connectors.spark")),
    ],
)
def test_imports_run_one_way(where: tuple[str, ...], forbidden: tuple[str, ...]) -> None:
    assert offending(files(*where), forbidden) == {}


def test_the_check_sees_an_offending_import(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from kafka_eos.lint import loaders\n")
    assert imports_of(module) == ["kafka_eos.lint"]


@pytest.mark.parametrize("name", ["connectors.options", "connectors.kafka_keys"])
def test_doc_examples_run(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
