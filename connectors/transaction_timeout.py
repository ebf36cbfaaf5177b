"""The transaction timeout the kafka-eos sink runs with when ``kafka.transaction.timeout.ms`` is
not set: chosen from the brokers' ``transaction.max.timeout.ms``, because librdkafka's own
1 min is too short for a micro-batch (rule EOS002).

The sink chooses it at startup (:mod:`connectors.kafka.sink.startup`); the linter's model of
the sink (:mod:`connectors.policy.connector_models`) sees the same choice, so ``kafka-eos lint``
of a ``sink:`` section and the sink's startup check judge the same value. Neither a Kafka client
nor the linter is imported here: both sides stand on it.
"""

from __future__ import annotations

import math

CHOSEN_NOTE = "chosen by the kafka-eos sink from the brokers' transaction.max.timeout.ms"
# The defaults of EOS002's safety_factor and EOS003's max_timeout_ms, which the sink's startup
# check runs with (a pipeline file's rule_options do not reach the sink).
SAFETY_FACTOR = 2.0
STALL_LIMIT_MS = 900_000


def default_transaction_timeout_ms(broker_max_ms: int, commit_window_ms: int) -> int:
    """What EOS002 requires (``commit_window_ms``: trigger + batch + restart, times the safety
    factor), but at least EOS003's 15 min and at most the brokers' maximum (EOS001). Longer than
    required costs readers nothing while the query runs, for the sink aborts its lingering
    transactions when it restarts, and gives a slow restart room to commit a decided batch;
    beyond 15 min, a query that dies for good stalls readers longer. A broker maximum below what
    EOS002 requires yields that maximum, which then fails EOS002.

    >>> default_transaction_timeout_ms(900_000, 370_000)
    900000
    >>> default_transaction_timeout_ms(3_600_000, 910_000)
    1820000
    """
    required = math.ceil(SAFETY_FACTOR * commit_window_ms)
    return min(broker_max_ms, max(required, STALL_LIMIT_MS))
