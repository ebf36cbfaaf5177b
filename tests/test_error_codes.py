"""Stable error codes: every error class of the project has its own ``KAFKA_EOS.<AREA>.<NAME>``
code, its message starts with it, it survives pickling (Spark ships errors from executors to
the driver), and docs/errors.md lists exactly the codes the classes have."""

from __future__ import annotations

import importlib
import pickle
import pkgutil
import re
from pathlib import Path

import pytest

import checkpoint
import connectors
import kafka_eos
from checkpoint.errors import (
    CheckpointTimeout,
    ConfigError,
    CorruptSnapshotError,
    DeadlineExceeded,
    KafkaEosError,
    UnsupportedFormatVersion,
)
from connectors.kafka.sink.errors import PreCommitLostError, TransactionLostError
from connectors.kafka.source.errors import DataLossError

PACKAGES = (checkpoint, connectors, kafka_eos)
ROOT_CODE = "KAFKA_EOS.INTERNAL"
CODE = re.compile(r"KAFKA_EOS\.[A-Z][A-Z0-9_]*\.[A-Z][A-Z0-9_]*")
DOCS = Path(__file__).resolve().parents[1] / "docs" / "errors.md"


def _import_all() -> None:
    """Import every module of the project, so that every error class is defined."""
    for package in PACKAGES:
        for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            try:
                importlib.import_module(info.name)
            except ModuleNotFoundError as exc:
                # The peer benchmarks' jobs (PyFlink, Quix Streams) run in venvs of their own.
                if (exc.name or "").split(".")[0] in {p.__name__ for p in PACKAGES}:
                    raise


def _subclasses(cls: type[KafkaEosError]) -> list[type[KafkaEosError]]:
    found: list[type[KafkaEosError]] = []
    for sub in cls.__subclasses__():
        found += [sub, *_subclasses(sub)]
    return found


def project_errors() -> list[type[KafkaEosError]]:
    _import_all()
    names = {p.__name__ for p in PACKAGES}
    classes = {c for c in _subclasses(KafkaEosError) if c.__module__.split(".")[0] in names}
    return sorted(classes, key=lambda c: (c.__module__, c.__qualname__))


ERRORS = project_errors()


def _name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def documented_codes() -> dict[str, str]:
    """Code -> the class named on its row of docs/errors.md's tables."""
    rows = re.findall(r"^\| `(KAFKA_EOS\.[A-Z0-9_.]+)` \| `([\w.]+)` \|", DOCS.read_text(), re.M)
    return dict(rows)


def test_the_walk_finds_the_errors_of_every_package() -> None:
    modules = {c.__module__.split(".")[0] for c in ERRORS}
    assert modules == {"checkpoint", "connectors", "kafka_eos"}
    assert len(ERRORS) >= 30


def test_the_root_has_the_internal_code() -> None:
    assert KafkaEosError.code == ROOT_CODE
    assert str(KafkaEosError("boom")) == f"[{ROOT_CODE}] boom"


@pytest.mark.parametrize("cls", ERRORS, ids=_name)
def test_every_error_class_has_its_own_code(cls: type[KafkaEosError]) -> None:
    assert "code" in cls.__dict__, f"{_name(cls)} inherits {cls.code}: give it its own code"
    assert CODE.fullmatch(cls.code), cls.code


def test_codes_are_unique() -> None:
    by_code: dict[str, list[str]] = {}
    for cls in [KafkaEosError, *ERRORS]:
        by_code.setdefault(cls.code, []).append(_name(cls))
    assert {code: names for code, names in by_code.items() if len(names) > 1} == {}


def test_docs_list_every_code_with_its_class_and_no_other() -> None:
    documented = documented_codes()
    actual = {cls.code: _name(cls) for cls in [KafkaEosError, *ERRORS]}
    assert documented == actual


SAMPLES: list[KafkaEosError] = [
    KafkaEosError("anything"),
    ConfigError("timeout must be > 0 seconds, got -1"),
    UnsupportedFormatVersion("snapshot", 3, (1,), "/ckpt/kafka-eos/7.snapshot.json"),
    CorruptSnapshotError("/ckpt/kafka-eos/7.snapshot.json", "sha256 mismatch"),
    CheckpointTimeout(5, 30.0, ("sink-1",)),
    DeadlineExceeded("flush did not finish within 1.0 s"),
    PreCommitLostError(7, "q-3", "detail"),
    TransactionLostError("q-0", 4001, 7, "gone").in_batch(12, ("q-0", "q-1")),
    DataLossError("orders-0 is gone"),
]


@pytest.mark.parametrize("error", SAMPLES, ids=lambda e: type(e).__name__)
def test_the_message_starts_with_the_code_once(error: KafkaEosError) -> None:
    text = str(error)
    assert text.startswith(f"[{error.code}] ")
    assert text == f"[{error.code}] {error.message}"
    assert text.count(f"[{error.code}]") == 1


@pytest.mark.parametrize("error", SAMPLES, ids=lambda e: type(e).__name__)
def test_pickling_keeps_the_type_the_attributes_and_the_message(error: KafkaEosError) -> None:
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert copy.__dict__ == error.__dict__
    assert (copy.code, copy.message, str(copy)) == (error.code, error.message, str(error))
    twice = pickle.loads(pickle.dumps(copy))
    assert str(twice) == str(error)  # no prefix added per trip


def test_a_raised_error_shows_its_code_in_the_traceback() -> None:
    with pytest.raises(TransactionLostError, match=r"^\[KAFKA_EOS\.SINK\.TRANSACTION_LOST\] "):
        raise TransactionLostError("q-0", 4001, 7, "gone")
