"""The Kafka sink's startup checks: the same rules, ids and messages as ``kafka-eos lint``.

The sink's startup (:mod:`connectors.kafka.sink.startup`) calls ``check_sink_config`` on the
driver before any task opens a transaction, and ``raise_for_errors`` to stop with one message
listing every error finding::

    >>> from connectors.policy import Timing, check_sink_config, raise_for_errors
    >>> findings = check_sink_config(
    ...     {"transactional.id": "orders-v1-0", "transaction.timeout.ms": 3600000},
    ...     {"transaction.max.timeout.ms": "900000"},
    ...     Timing(max_batch_duration_ms=120_000),
    ... )
    >>> [f.rule for f in findings]
    ['EOS001']
    >>> raise_for_errors(findings)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    connectors.policy.errors.SinkConfigError: [KAFKA_EOS.SINK.CONFIG_REJECTED] 1 exactly-once ...
    ...

Only plain values are read; callbacks in the producer config (``error_cb``) are ignored.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from connectors.policy.client_keys import DEFAULT_CLIENT, Client
from connectors.policy.errors import SinkConfigError
from connectors.policy.findings import Finding
from connectors.policy.inputs import LintInput, Timing, config_value
from connectors.policy.registry import run_rules

# transaction.timeout.ms <= broker maximum; comfortably above trigger + batch + restart;
# message.timeout.ms <= transaction.timeout.ms.
SINK_RULES: tuple[str, ...] = ("EOS001", "EOS002", "EOS004")


def check_sink_config(
    producer_config: Mapping[str, object],
    broker_config: Mapping[str, object] | None,
    timing: Timing,
    *,
    client: Client = DEFAULT_CLIENT,
) -> list[Finding]:
    """Run the sink's startup rules on the producer as the kafka-eos sink runs it (with the
    timeout it chooses when none is set, :mod:`connectors.transaction_timeout`).
    ``broker_config=None`` (unknown) skips EOS001."""
    return run_rules(_sink_input(producer_config, broker_config, timing, client), select=SINK_RULES)


def raise_for_errors(findings: Iterable[Finding]) -> None:
    """Raise ``SinkConfigError`` listing the error findings, if there are any."""
    errors = [finding for finding in findings if finding.severity == "error"]
    if errors:
        raise SinkConfigError(errors)


def _sink_input(
    producer_config: Mapping[str, object],
    broker_config: Mapping[str, object] | None,
    timing: Timing,
    client: Client,
) -> LintInput:
    return LintInput(
        client=client,
        producer=_as_config(producer_config),
        broker=None if broker_config is None else _as_config(broker_config),
        timing=timing,
        kafka_eos_sink=True,
    )


def _as_config(config: Mapping[str, object]) -> dict[str, str]:
    return {key: text for key, value in config.items() if (text := config_value(value)) is not None}
