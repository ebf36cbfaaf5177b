"""``kafka-eos lint``: check an exactly-once pipeline's Kafka configuration.

Only composes ``connectors.policy``: read the inputs, optionally read the live cluster, run
the rules, print the report. Exit codes: 0 no errors, 1 errors found (warnings too with
``--strict``), 2 usage or input errors (unreadable file, bad value, unreachable cluster).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import click

from connectors.options import duration_ms, format_duration
from connectors.policy.client_keys import CLIENTS, DEFAULT_CLIENT, Client
from connectors.policy.errors import LintError, LintOptionError
from connectors.policy.inputs import TIMING_NAMES, ConsumerInput, LintInput, Timing
from connectors.policy.registry import RULES, lint_report
from connectors.redact import scrub, secret_values
from kafka_eos.commands._cluster import InputFailure, JsonErrorsCommand, json_option, wants_json
from kafka_eos.lint.loaders import load_pipeline, load_properties, parse_kafka_options
from kafka_eos.lint.render import print_report

_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)
_DEFAULT_TIMING = Timing()


class _Duration(click.ParamType):
    """``30s``, ``5m``, ``1h``, ``7d`` or plain milliseconds, converted to milliseconds."""

    name = "duration"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> int:
        if isinstance(value, int):
            return value
        try:
            option = param.opts[0] if param else self.name
            return duration_ms(option, str(value), error=LintOptionError)
        except LintOptionError as exc:
            self.fail(str(exc), param, ctx)


_DURATION = _Duration()


def _timing_option(name: str, what: str) -> click.Option:
    default = getattr(_DEFAULT_TIMING, TIMING_NAMES[name])
    return click.option(
        f"--{name.replace('_', '-')}",
        name,
        type=_DURATION,
        help=f"{what} (default {format_duration(default)}).",
    )


@click.command("lint", cls=JsonErrorsCommand)
@click.option(
    "--config", "pipeline_file", type=_FILE, help="Pipeline file, YAML or JSON (see docs/lint.md)."
)
@click.option("--producer-config", type=_FILE, help="Producer .properties (the sink's producer).")
@click.option(
    "--consumer-config",
    type=_FILE,
    help="Source consumer .properties (any consumer; with a pipeline file's source: section,"
    " the kafka-eos source).",
)
@click.option(
    "--downstream-consumer-config",
    type=_FILE,
    multiple=True,
    help="Consumer of the output (repeatable).",
)
@click.option("--broker-config", type=_FILE, help="Broker server.properties.")
@click.option("--output-topic", multiple=True, help="Topic the sink writes (repeatable).")
@click.option("--source-topic", multiple=True, help="Topic the source reads (repeatable).")
@_timing_option("trigger_interval", "Trigger interval")
@_timing_option("max_batch_duration", "Longest micro-batch")
@_timing_option("max_restart_time", "Longest crash-to-running restart")
@_timing_option("max_checkpoint_age", "Oldest checkpoint ever restored, i.e. longest pause")
@_timing_option("max_idle_time", "Longest run without a transaction (no input, no batch)")
@click.option("--bootstrap-servers", help="Read broker and topic facts from this live cluster.")
@click.option(
    "-X",
    "--kafka-option",
    "kafka_options",
    multiple=True,
    metavar="KEY=VALUE",
    help="AdminClient option for the live cluster, e.g. security.protocol=SASL_SSL (repeatable).",
)
@click.option(
    "--cluster-timeout",
    type=_DURATION,
    default="15s",
    show_default=True,
    help="Deadline for reading the live cluster.",
)
@click.option(
    "--client",
    type=click.Choice(CLIENTS),
    help=f"Whose defaults apply to unset keys (default {DEFAULT_CLIENT}: our connectors use"
    " confluent-kafka).",
)
@click.option(
    "--select", multiple=True, help="Only these rule ids or names (comma-separated, repeatable)."
)
@click.option(
    "--ignore", multiple=True, help="Skip these rule ids or names (comma-separated, repeatable)."
)
@json_option
@click.option(  # the spelling before --json, which every command has: kept for scripts
    "--format", "fmt", type=click.Choice(["text", "json"]), default=None, hidden=True
)
@click.option("--strict", is_flag=True, help="Exit 1 on warnings too.")
@click.option("--list-rules", is_flag=True, help="List the rules and exit.")
def command(
    pipeline_file: Path | None,
    producer_config: Path | None,
    consumer_config: Path | None,
    downstream_consumer_config: tuple[Path, ...],
    broker_config: Path | None,
    output_topic: tuple[str, ...],
    source_topic: tuple[str, ...],
    trigger_interval: int | None,
    max_batch_duration: int | None,
    max_restart_time: int | None,
    max_checkpoint_age: int | None,
    max_idle_time: int | None,
    bootstrap_servers: str | None,
    kafka_options: tuple[str, ...],
    cluster_timeout: int,
    client: Client | None,
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    as_json: bool,
    fmt: str | None,
    strict: bool,
    list_rules: bool,
) -> None:
    """Lint the exactly-once configuration of a Kafka -> Spark -> Kafka pipeline.

    Without broker config or --bootstrap-servers, a broker on Apache Kafka defaults is
    assumed. Rules lacking the data they need (topics, broker count) do not fire.
    """
    if fmt is not None:
        click.echo(
            "kafka-eos lint: --format is deprecated: use --json, or nothing for text", err=True
        )
    if list_rules:
        for rule in RULES.values():
            click.echo(f"{rule.meta.id}  {rule.meta.severity:<7}  {rule.meta.name}: {rule.summary}")
        return
    configs = (pipeline_file, producer_config, consumer_config, broker_config, bootstrap_servers)
    if not downstream_consumer_config and all(given is None for given in configs):
        # Defaults alone pass every rule: "no findings" would read as a clean bill of health.
        raise click.UsageError(
            "nothing to lint: give a pipeline file (--config pipeline.yaml, YAML or JSON), "
            "clients' .properties (--producer-config, --consumer-config, "
            "--downstream-consumer-config), the brokers' --broker-config, or --bootstrap-servers "
            "to read a live cluster (docs/lint.md, 'Inputs'); --list-rules lists the rules"
        )
    timing = {
        TIMING_NAMES[name]: value
        for name, value in (
            ("trigger_interval", trigger_interval),
            ("max_batch_duration", max_batch_duration),
            ("max_restart_time", max_restart_time),
            ("max_checkpoint_age", max_checkpoint_age),
            ("max_idle_time", max_idle_time),
        )
        if value is not None
    }
    secrets: set[str] = set()
    try:
        options = parse_kafka_options(kafka_options)
        secrets |= secret_values([options])
        lint_input = (load_pipeline(pipeline_file) if pipeline_file else LintInput()).overlay(
            client=client,
            producer=_properties(producer_config),
            consumer=_properties(consumer_config),
            downstream_consumers=tuple(
                ConsumerInput(str(path), load_properties(path))
                for path in downstream_consumer_config
            ),
            broker=_properties(broker_config),
            output_topics=output_topic,
            source_topics=source_topic,
            timing_ms=timing,
        )
        secrets |= secret_values(_configs(lint_input))
        if bootstrap_servers:
            from connectors.kafka.cluster_facts import (
                read_cluster,  # confluent-kafka only when needed
            )

            snapshot = read_cluster(
                bootstrap_servers,
                (*lint_input.output_topic_names(), *lint_input.source_topic_names()),
                options=options,
                timeout_s=cluster_timeout / 1000,
            )
            lint_input = lint_input.with_cluster(snapshot)
        report = lint_report(
            lint_input.with_default_broker(), _split(select) or None, _split(ignore)
        )
    except LintError as exc:
        raise InputFailure(exc.code, scrub(exc.message, secrets)) from None
    print_report(report, "json" if wants_json(click.get_current_context()) else "text", sys.stdout)
    summary = report["summary"]
    if summary["errors"] or (strict and summary["warnings"]):
        click.get_current_context().exit(1)


def _properties(path: Path | None) -> dict[str, str] | None:
    return None if path is None else load_properties(path)


def _configs(lint_input: LintInput) -> Iterable[Mapping[str, str]]:
    """Every client and broker config of ``lint_input``, to collect secrets to scrub."""
    for config in (lint_input.producer, lint_input.consumer, lint_input.broker):
        if config is not None:
            yield config
    for consumer in lint_input.downstream_consumers:
        yield consumer.config


def _split(values: tuple[str, ...]) -> list[str]:
    """``("EOS001,EOS002", "EOS003")`` -> ``["EOS001", "EOS002", "EOS003"]``."""
    return [part for value in values for part in value.split(",") if part.strip()]
