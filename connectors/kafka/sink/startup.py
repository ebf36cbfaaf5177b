"""The sink's startup checks on the driver, before any task opens a transaction: the rules
``kafka-eos lint`` runs on a producer (EOS001, EOS002, EOS004), on the producer as the sink runs
it, so a job fails fast on timeouts that would break the guarantee.

Without ``kafka.transaction.timeout.ms``, the sink runs with the timeout it chooses from the
brokers' maximum (:mod:`connectors.transaction_timeout`), which the rules see as chosen; the
tasks get it inside the options. Spark builds the writer for every batch, in more than one
process, so a pass is kept for a while rather than reading the brokers every batch.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping
from typing import Any

from connectors.kafka.cluster_facts import LiveClusterError, read_cluster
from connectors.kafka.sink.options import SinkOptions
from connectors.policy import Timing, check_sink_config, raise_for_errors
from connectors.policy.context import BrokerView
from connectors.policy.inputs import config_value
from connectors.transaction_timeout import default_transaction_timeout_ms

_log = logging.getLogger(__name__)
_TIMEOUT = "transaction.timeout.ms"
# How long a passed check stands before the next writer reads the brokers again: a lowered
# transaction.max.timeout.ms is seen within it, and a batch's commit does not wait on it.
CHECK_REFRESH_S = 600.0
Producer = tuple[tuple[str, Any], ...]
# (bootstrap servers, producer config, timing) -> (when it passed, the config it passed with)
_passes: dict[tuple[str, Producer, Timing], tuple[float, Producer]] = {}


def startup_checks(sink: SinkOptions) -> SinkOptions:
    """``sink`` with the producer config it runs with, once the startup rules pass on it."""
    producer = _checked_producer(
        sink.bootstrap_servers, tuple(sorted(sink.producer_config.items())), sink.timing
    )
    return dataclasses.replace(sink, producer_config=dict(producer))


def producer_as_run(
    producer_config: Mapping[str, Any], broker_config: Mapping[str, str], timing: Timing
) -> dict[str, Any]:
    """The user's producer config plus the timeout the sink chooses when the user set none;
    raises ``SinkConfigError`` listing every error finding of the startup rules on it. The
    brokers' maximum and the user's value are read as the rules read them, so the rules judge
    the very timeout the sink runs with."""
    raise_for_errors(check_sink_config(producer_config, broker_config, timing))
    config = dict(producer_config)
    if config_value(config.get(_TIMEOUT)) is None:
        broker_max = BrokerView(broker_config).get("transaction.max.timeout.ms").ms()
        chosen = default_transaction_timeout_ms(broker_max, timing.commit_window_ms)
        config[_TIMEOUT] = str(chosen)
    return config


def _checked_producer(bootstrap: str, producer: Producer, timing: Timing) -> Producer:
    """Once per driver-side process, configuration and refresh period. A broker restarting
    during a rolling upgrade must not fail a commit or an abort for a check that passed: when
    the brokers cannot be read, the last pass stands for another period. Only a pass is kept,
    so a process keeps one chosen timeout for all its batches until the brokers' maximum
    changes."""
    key = (bootstrap, producer, timing)
    last = _passes.get(key)
    if last is not None and time.monotonic() - last[0] < CHECK_REFRESH_S:
        return last[1]
    config = dict(producer)
    security = {k: v for k, v in config.items() if k != "bootstrap.servers"}
    try:
        broker_config = read_cluster(bootstrap, [], options=security).broker_config
    except LiveClusterError:
        if last is None:
            raise
        _log.warning(
            "the brokers could not be read again; the last passed check stands for another "
            "%.0f s", CHECK_REFRESH_S,
        )  # fmt: skip
        # Renewed: a broker down for long must not cost every batch the read's timeout.
        _passes[key] = (time.monotonic(), last[1])
        return last[1]
    checked = producer_as_run(config, broker_config, timing)
    if checked != config and (last is None or dict(last[1]) != checked):
        _log.info(
            "option 'kafka.transaction.timeout.ms' is not set: the sink runs with %s, chosen "
            "from the brokers' transaction.max.timeout.ms", checked[_TIMEOUT],
        )  # fmt: skip
    _passes[key] = (time.monotonic(), tuple(sorted(checked.items())))
    return _passes[key][1]
