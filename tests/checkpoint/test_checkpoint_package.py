"""Package-wide guarantees: engine-neutral imports, public exports, runnable doc examples."""

from __future__ import annotations

import ast
import doctest
import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import checkpoint

PACKAGE_DIR = Path(checkpoint.__file__).parent
ENGINES = ("confluent_kafka", "kafka", "pyspark", "py4j")
MODULES = sorted(f"checkpoint.{m.name}" for m in pkgutil.iter_modules([str(PACKAGE_DIR)]))


@pytest.mark.parametrize("path", sorted(PACKAGE_DIR.glob("*.py")), ids=lambda p: p.name)
def test_no_module_imports_kafka_or_spark(path: Path) -> None:
    imported: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            imported += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            imported.append(node.module)
    assert not [name for name in imported if name.split(".")[0] in ENGINES]


def test_importing_the_package_loads_no_engine_and_no_remote_filesystem() -> None:
    code = (
        "import sys, checkpoint, checkpoint.testing; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'confluent_kafka', 'kafka', 'pyspark', 'pyarrow', 'fsspec'}))"
    )
    root = str(PACKAGE_DIR.parent)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root)
    assert out.stdout.strip() == "[]", out.stderr


def test_all_names_the_public_api() -> None:
    assert sorted(checkpoint.__all__) == checkpoint.__all__
    assert all(hasattr(checkpoint, name) for name in checkpoint.__all__)


@pytest.mark.parametrize("name", MODULES)
def test_doc_examples_run(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
