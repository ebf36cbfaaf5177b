"""The layers the tree shows hold in the imports: ``kafka_eos`` -> ``connectors`` ->
``checkpoint``, the runtime never imports the linter's front end, the policy the linter reads
needs no Kafka client and imports nothing of ``connectors/kafka``, and no file or package
imports another that imports it back."""

from __future__ import annotations

import ast
import doctest
import importlib
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CLIENTS = ("confluent_kafka", "kafka", "pyspark")
PRODUCT = ("checkpoint", "connectors", "kafka_eos")
# The command's entry point composes every command: it sits at the root of the tree it imports.
ENTRY_POINT = "kafka_eos.cli"


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
        (("connectors", "policy"), (*CLIENTS, "connectors.kafka", "connectors.spark")),
        (("connectors", "kafka_keys.py"), CLIENTS),
        (("connectors", "options.py"), (*CLIENTS, "connectors.policy")),
        (("connectors", "kafka", "source"), ("connectors.kafka.sink", "connectors.spark")),
        (("connectors", "kafka", "sink"), ("connectors.kafka.source", "connectors.spark")),
    ],
)
def test_imports_run_one_way(where: tuple[str, ...], forbidden: tuple[str, ...]) -> None:
    assert offending(files(*where), forbidden) == {}


def product_modules() -> dict[str, Path]:
    """Every module of the product by dotted name; a package by its ``__init__``."""
    modules = {}
    for top in PRODUCT:
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def import_graph(modules: Mapping[str, Path]) -> dict[str, set[str]]:
    """Module -> the product modules it imports (``from package import module`` names the
    module; ``from package import name`` the package's ``__init__``)."""
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                wanted = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                wanted = [f"{node.module}.{alias.name}" for alias in node.names]
            else:
                continue
            for target in wanted:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    targets.add(target)
        graph[name] = targets
    return graph


def loops(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of more than one node (Tarjan): each is an import loop."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            part = [stack.pop()]
            while part[-1] != node:
                part.append(stack.pop())
            if len(part) > 1:
                found.append(sorted(part))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def collapsed(graph: Mapping[str, set[str]], unit: Callable[[str], str]) -> dict[str, set[str]]:
    """The graph between units (packages), each module replaced by its unit."""
    between: dict[str, set[str]] = {}
    for module, targets in graph.items():
        between.setdefault(unit(module), set())
        for target in targets:
            if unit(target) != unit(module):
                between[unit(module)].add(unit(target))
    return between


def package_of(module: str, modules: Mapping[str, Path]) -> str:
    """The folder a module lies in. The lint rules are plugins the policy's registry loads,
    so ``connectors/policy/rules`` counts as the policy's own."""
    folder = ".".join(modules[module].relative_to(ROOT).parent.parts)
    return folder.removesuffix(".rules") if folder == "connectors.policy.rules" else folder


def test_no_file_imports_one_that_imports_it_back() -> None:
    assert loops(import_graph(product_modules())) == []


def test_no_package_imports_one_that_imports_it_back() -> None:
    modules = product_modules()
    graph = import_graph(modules)
    del graph[ENTRY_POINT]
    assert loops(collapsed(graph, lambda module: package_of(module, modules))) == []


def test_the_loop_check_finds_a_loop() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert loops(graph) == [["a", "b", "c"]]
    assert loops(collapsed(graph, lambda m: "x" if m in "ab" else m)) == [["c", "x"]]


def test_the_check_sees_an_offending_import(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from kafka_eos.lint import loaders\n")
    assert imports_of(module) == ["kafka_eos.lint"]


@pytest.mark.parametrize("name", ["connectors.options", "connectors.kafka_keys"])
def test_doc_examples_run(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
