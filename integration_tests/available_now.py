"""A run to the end of what is available, on every supported PySpark.

PySpark 4.0 and 4.1 run ``Trigger.AvailableNow`` over a Python source as one batch (they give
it no read limit: connectors.spark.compat), so a rate-limited run would end after its first
batch. There the tests run the default trigger, wait with ``processAllAvailable`` and stop:
the same batches, planned by the source's own limit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from connectors.spark.compat import ADMISSION_CONTROL

if TYPE_CHECKING:
    from pyspark.sql.streaming import DataStreamWriter, StreamingQuery


def start(writer: DataStreamWriter) -> StreamingQuery:
    """``writer`` started with ``Trigger.AvailableNow`` where it splits batches."""
    return writer.trigger(availableNow=True).start() if ADMISSION_CONTROL else writer.start()


def wait(query: StreamingQuery, timeout_s: float | None = None) -> None:
    """Until the run has processed everything available and ended."""
    if not ADMISSION_CONTROL and query.isActive:
        query.processAllAvailable()
        query.stop()
    query.awaitTermination(timeout_s)
