"""Errors of the Kafka source. Each message names what was seen and how to fix it, because it
surfaces in a Spark driver or executor log far from the option that caused it."""

from __future__ import annotations

import logging

from checkpoint.errors import KafkaEosError
from connectors.options import OptionError

_log = logging.getLogger(__name__)


class KafkaSourceError(KafkaEosError):
    """Root of the source's errors: the Kafka source for Spark cannot go on."""

    code = "KAFKA_EOS.SOURCE.READ_FAILED"


class SourceOptionError(KafkaSourceError, OptionError):
    """A source option is missing, malformed or contradicts another one.

    >>> SourceOptionError("maxOffsetsPerTrigger", "-5", "a positive whole number, e.g. 100000")
    """

    code = "KAFKA_EOS.SOURCE.INVALID_OPTION"
    side = "source"


class DataLossError(KafkaSourceError):
    """Offsets the query needs are gone (retention, ``delete_records``, a recreated topic).

    Raised only with ``failOnDataLoss=true`` (the default); with ``false`` the source logs the
    same text as a warning and skips what is gone, as Spark's built-in source does.
    """

    code = "KAFKA_EOS.SOURCE.DATA_LOSS"

    def __init__(self, detail: str) -> None:
        self.detail = detail
        super().__init__(f"{detail}. {DATA_LOSS_HINT}")


DATA_LOSS_HINT = (
    "Some data may have been lost because it is not available in Kafka any more: it was "
    "deleted by retention or delete_records, or the topic was deleted and recreated. If you "
    "accept the loss, set the source option failOnDataLoss=false to skip what is gone"
)


def report_data_loss(detail: str, *, fail: bool) -> None:
    """Spark's ``reportDataLoss``: raise with ``failOnDataLoss=true``, else warn and go on."""
    if fail:
        raise DataLossError(detail)
    _log.warning("kafka-eos source: %s. Skipping it because failOnDataLoss=false.", detail)
