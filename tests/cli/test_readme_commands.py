"""README's table of `kafka-eos` commands names every command of the CLI, and nothing else."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import click

from kafka_eos.cli import main

README = Path(__file__).resolve().parents[2] / "README.md"


def _commands(command: click.Command, path: tuple[str, ...] = ()) -> Iterator[str]:
    """Every runnable command under ``command``, as typed: ``kafka-eos txn resolve``."""
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            yield from _commands(sub, (*path, name))
    else:
        yield " ".join(("kafka-eos", *path))


def _table() -> list[str]:
    text = README.read_text(encoding="utf-8")
    section = text.split("### The `kafka-eos` command", 1)[1].split("\n#", 1)[0]
    return re.findall(r"^\| `(kafka-eos[^`]*)` \|", section, re.M)


def test_readme_lists_every_command_once() -> None:
    rows = _table()
    assert len(rows) == len(set(rows)), rows
    assert sorted(rows) == sorted(_commands(main))
