"""The kafka-eos Spark sink as the rules must see it: a pipeline file's ``sink:`` section.

Its producer runs with what the sink chooses where the options are silent, so that a job
written for Spark's ``kafka`` sink runs unchanged:

- a transactional id always: ``transactionalIdPrefix``, or a prefix derived from the
  checkpoint location (``connectors.kafka.sink.naming.derived_prefix``);
- without ``transaction.timeout.ms``, :func:`default_transaction_timeout_ms`, chosen from the
  brokers' ``transaction.max.timeout.ms`` (librdkafka's own 1 min would fail EOS002).

The sink's startup check (``sink_checks.checked_sink_config``) lints with this view too, so a
chosen timeout that fails a rule is reported as chosen, and ``kafka-eos lint`` of a ``sink:``
section finds what the running sink would.
"""

from __future__ import annotations

import math

from connectors.policy.inputs import Timing

NAME = "the kafka-eos sink"
CHOSEN_TIMEOUT_NOTE = "chosen by the kafka-eos sink from the brokers' transaction.max.timeout.ms"
# The defaults of EOS002's safety_factor and EOS003's max_timeout_ms, which the sink's startup
# check runs with (a pipeline file's rule_options do not reach the sink).
SAFETY_FACTOR = 2.0
STALL_LIMIT_MS = 900_000


def default_transaction_timeout_ms(broker_max_ms: int, timing: Timing) -> int:
    """What EOS002 requires, but at least EOS003's 15 min and at most the brokers' maximum
    (EOS001). Longer than required costs readers nothing while the query runs, for the sink
    aborts its lingering transactions when it restarts, and gives a slow restart room to
    commit a decided batch; beyond 15 min, a query that dies for good stalls readers longer.
    A broker maximum below what EOS002 requires yields that maximum, which then fails EOS002.

    >>> default_transaction_timeout_ms(900_000, Timing()), default_transaction_timeout_ms(
    ...     3_600_000, Timing(max_batch_duration_ms=600_000))
    (900000, 1820000)
    """
    required = math.ceil(SAFETY_FACTOR * timing.commit_window_ms)
    return min(broker_max_ms, max(required, STALL_LIMIT_MS))
