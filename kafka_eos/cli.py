"""The ``kafka-eos`` command line: a click group that only composes the subcommands."""

from __future__ import annotations

import click

from kafka_eos import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kafka-eos")
def main() -> None:
    """Exactly-once Kafka -> Spark -> Kafka pipelines for PySpark."""


def _register() -> None:
    """Import each subcommand module and attach its command; keeps this file free of logic."""
    from kafka_eos.commands import registered_commands

    for command in registered_commands():
        main.add_command(command)


_register()
