"""Options and output helpers shared by the subcommands that talk to a live cluster.

``-X`` is parsed by the linter's own parser, so ``kafka-eos lint``, ``txn`` and ``verify``
accept the same ``KEY=VALUE`` forms; secrets given there are scrubbed from every error.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any, TypedDict, TypeVar

import click
from rich.console import Console

from checkpoint.errors import KafkaEosError
from connectors.policy.errors import LintInputError
from connectors.redact import scrub, secret_values
from kafka_eos.cluster import DEFAULT_KAFKA_VERSION, SUPPORTED_KAFKA_VERSIONS
from kafka_eos.lint.loaders import parse_kafka_options

F = TypeVar("F", bound=Callable[..., Any])


class InputFailure(click.ClickException):
    """Bad option or unreachable cluster: exit 2 like click's own usage errors. Shown as
    ``[code] detail``, as the error it stands for; ``--json`` gives the two apart."""

    exit_code = 2

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(f"[{code}] {detail}")
        self.code, self.detail = code, detail


class ErrorDict(TypedDict):
    code: str | None  # the stable code (docs/errors.md); None for click's usage errors
    message: str


class ErrorReportDict(TypedDict):
    version: int
    error: ErrorDict


# Every command's one spelling for machine output; its failures print as JSON too.
json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print JSON for machines, errors included."
)


class JsonErrorsCommand(click.Command):
    """A command whose failures, under ``--json``, are a JSON document on stdout, where a
    script reads its output: ``{"version": 1, "error": {"code": ..., "message": ...}}``. The
    exit code stays the failure's (2 for bad input or an unreachable cluster). Errors in the
    command line itself, found before the command runs, stay click's text."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.ClickException as exc:
            if not wants_json(ctx):
                raise
            click.echo(json.dumps(error_report(exc), indent=2))
            ctx.exit(exc.exit_code)


def wants_json(ctx: click.Context) -> bool:
    """``--json``, or lint's deprecated ``--format json``."""
    return bool(ctx.params.get("as_json")) or ctx.params.get("fmt") == "json"


def error_report(exc: click.ClickException) -> ErrorReportDict:
    """A failure as JSON: an error's code and its message apart; click's own have no code."""
    error: ErrorDict = (
        {"code": exc.code, "message": exc.detail}
        if isinstance(exc, InputFailure)
        else {"code": None, "message": exc.format_message()}
    )
    return {"version": 1, "error": error}


def cluster_options(function: F) -> F:
    """``--bootstrap-servers`` (or ``$KAFKA_BOOTSTRAP_SERVERS``) and ``-X KEY=VALUE``."""
    function = click.option(
        "-X",
        "--kafka-option",
        "kafka_options",
        multiple=True,
        metavar="KEY=VALUE",
        help="Kafka client option (librdkafka key), e.g. security.protocol=SASL_SSL (repeatable).",
    )(function)
    return click.option(
        "--bootstrap-servers",
        envvar="KAFKA_BOOTSTRAP_SERVERS",
        required=True,
        help="The cluster, e.g. broker1:9092,broker2:9092 (default $KAFKA_BOOTSTRAP_SERVERS).",
    )(function)


def embedded_or_external_kafka(function: F) -> F:
    """``--bootstrap-servers`` (optional: without it an embedded Kafka is started) and
    ``--kafka-version`` of that embedded Kafka; for ``demo`` and ``bench``."""
    function = click.option(
        "--kafka-version",
        type=click.Choice(SUPPORTED_KAFKA_VERSIONS),
        default=DEFAULT_KAFKA_VERSION,
        show_default=True,
        help="Version of the embedded Kafka.",
    )(function)
    return click.option(
        "--bootstrap-servers",
        envvar="KAFKA_BOOTSTRAP_SERVERS",
        default=None,
        help="Use this Kafka instead of starting an embedded one.",
    )(function)


def client_options(pairs: tuple[str, ...]) -> dict[str, str]:
    """The ``-X`` pairs as a librdkafka-style config."""
    try:
        return parse_kafka_options(pairs)
    except LintInputError as exc:
        raise InputFailure(exc.code, f"-X: {exc.message}") from None


def failure(exc: KafkaEosError, options: dict[str, str]) -> InputFailure:
    """An expected failure as a one-line error, without any secret passed with ``-X``."""
    return InputFailure(exc.code, scrub(exc.message, secret_values([options])))


def console() -> Console:
    """Rich output on stdout; wide when piped, so ids are never folded across lines."""
    return Console(highlight=False, width=None if sys.stdout.isatty() else 200)
