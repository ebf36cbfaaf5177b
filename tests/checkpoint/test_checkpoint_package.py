"""Package-wide guarantees: no engine loaded on import, public exports, runnable doc examples.

What the package's modules may import is held with the other layers, in ``tests/test_layers.py``.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import checkpoint

PACKAGE_DIR = Path(checkpoint.__file__).parent
MODULES = sorted(f"checkpoint.{m.name}" for m in pkgutil.iter_modules([str(PACKAGE_DIR)]))


def test_importing_the_package_loads_no_engine_and_no_remote_filesystem() -> None:
    code = (
        "import sys, checkpoint, checkpoint.testing; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'confluent_kafka', 'kafka', 'pyspark', 'pyarrow', 'fsspec', 'boto3', 'botocore'}))"
    )
    root = str(PACKAGE_DIR.parent)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root)
    assert out.stdout.strip() == "[]", out.stderr


def test_all_names_the_public_api() -> None:
    assert sorted(checkpoint.__all__) == checkpoint.__all__
    assert all(hasattr(checkpoint, name) for name in checkpoint.__all__)


@pytest.mark.parametrize("name", MODULES)
def test_doc_examples_run(name: str) -> None:
    if name == "checkpoint._s3":  # the S3 backend, imported for S3 locations only
        pytest.importorskip("boto3", reason="the s3 extra: pip install -e '.[s3]'")
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
