"""One module per ``kafka-eos`` subcommand; ``kafka_eos.cli`` only registers them."""

from __future__ import annotations

import importlib

import click

# Each entry is a module of this package exposing a click command named ``command``.
_MODULES: tuple[str, ...] = ("bench", "demo", "lint", "txn", "verify")


def registered_commands() -> list[click.Command]:
    """Return the subcommands, imported lazily so that ``--help`` stays fast."""
    return [importlib.import_module(f"{__name__}.{name}").command for name in _MODULES]
