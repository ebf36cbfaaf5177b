"""The Kafka sink's startup checks: the same rules, ids and messages as ``kafka-eos lint``.

The sink calls ``check_sink_config`` on the driver before opening any transaction, and
``raise_for_errors`` to stop with one message listing every error finding::

    >>> from connectors.lint import Timing, check_sink_config, raise_for_errors
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
    connectors.lint.errors.SinkConfigError: 1 exactly-once configuration error(s):
    ...

Only plain values are read; callbacks in the producer config (``error_cb``) are ignored.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from connectors.lint.client_keys import DEFAULT_CLIENT, Client, find_key
from connectors.lint.context import BrokerView
from connectors.lint.errors import SinkConfigError
from connectors.lint.findings import Finding
from connectors.lint.inputs import LintInput, Timing, config_value
from connectors.lint.registry import run_rules
from connectors.lint.rules.eos002_transaction_timeout_too_short import RULE as EOS002
from connectors.lint.rules.eos003_transaction_timeout_stalls_readers import RULE as EOS003

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
    """Run the sink's startup rules. ``broker_config=None`` (unknown) skips EOS001."""
    lint_input = LintInput(
        client=client,
        producer=_as_config(producer_config),
        broker=None if broker_config is None else _as_config(broker_config),
        timing=timing,
    )
    return run_rules(lint_input, select=SINK_RULES)


def checked_sink_config(
    producer_config: Mapping[str, object], broker_config: Mapping[str, object], timing: Timing
) -> dict[str, object]:
    """The producer config the sink runs with, once the startup rules pass on it: the user's,
    plus a transaction timeout when it sets none (:func:`default_transaction_timeout_ms`).
    A default that fails a rule says so beside the findings: the user never wrote it."""
    config = dict(producer_config)
    context = ""
    if find_key(_as_config(config), "transaction.timeout.ms") is None:
        chosen = default_transaction_timeout_ms(broker_config, timing)
        config["transaction.timeout.ms"] = str(chosen)
        context = (
            f"option 'kafka.transaction.timeout.ms' is not set; the sink chose {chosen}, "
            "from the brokers' transaction.max.timeout.ms and the timing options"
        )
    raise_for_errors(check_sink_config(config, broker_config, timing), context=context)
    return config


def default_transaction_timeout_ms(broker_config: Mapping[str, object], timing: Timing) -> int:
    """The ``transaction.timeout.ms`` of a sink that sets none (librdkafka's 1 min fails
    EOS002): what EOS002 requires, but at least EOS003's 15 min and at most what the brokers
    allow (EOS001). Longer than required costs readers nothing while the query runs, for the
    sink aborts its lingering transactions when it restarts, and gives a slow restart room to
    commit a decided batch; longer than 15 min would stall readers when a query dies for good.
    The caller still runs the checks: a broker maximum below what EOS002 requires fails them.
    """
    broker_max = BrokerView(_as_config(broker_config)).get("transaction.max.timeout.ms").ms()
    factor = float(EOS002.options["safety_factor"])
    required = math.ceil(factor * timing.commit_window_ms)
    stall_limit = int(EOS003.options["max_timeout_ms"])
    return min(broker_max, max(required, stall_limit))


def raise_for_errors(findings: Iterable[Finding], *, context: str = "") -> None:
    """Raise ``SinkConfigError`` listing the error findings, if there are any; ``context``
    says where a value the user never set came from."""
    errors = [finding for finding in findings if finding.severity == "error"]
    if errors:
        raise SinkConfigError(errors, context=context)


def _as_config(config: Mapping[str, object]) -> dict[str, str]:
    return {key: text for key, value in config.items() if (text := config_value(value)) is not None}
