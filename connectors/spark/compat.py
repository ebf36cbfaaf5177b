"""What differs between the PySpark releases kafka-eos supports (4.0 to 4.3), detected by
feature, not by version number, so that a patch release that backports a feature gets it.

- **Admission control for Python stream readers** (``pyspark.sql.streaming.datasource``:
  ``ReadLimit``, ``latestOffset(start, limit)``, ``SupportsTriggerAvailableNow``,
  ``reportLatestOffset``): PySpark 4.2 and later. PySpark 4.0 and 4.1 call ``latestOffset()``
  with neither a start nor a limit, and run ``Trigger.AvailableNow`` as one batch up to the
  latest offset fetched when the run begins. The source then takes its start from the batches
  Spark planned (:class:`NextStart`) and applies its own limit from the options; the
  stand-in classes below keep one code path for both.
- **Spark's schema in Arrow** (``to_arrow_schema``): UTC timestamps are ``timezone="UTC"``
  from PySpark 4.2 on, ``timestamp_utc=True`` before (:func:`arrow_schema`).
- **Arrow batches for stream writers** (``DataSourceStreamArrowWriter``): PySpark 4.1 and
  later. PySpark 4.0's write worker hands Arrow batches to any writer that is a
  ``DataSourceArrowWriter``, and its commit worker calls ``commit(messages, batchId)`` on the
  stream writer whatever its class: the stand-in is both.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyspark
from pyspark.sql import datasource
from pyspark.sql.pandas.types import to_arrow_schema

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

try:
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        ReadMinRows,
        SupportsTriggerAvailableNow,
    )

    ADMISSION_CONTROL = True
except ModuleNotFoundError:  # PySpark 4.0 and 4.1
    ADMISSION_CONTROL = False

    class ReadLimit:  # type: ignore[no-redef]
        """Stand-in: the limit the source applies itself, Spark passing none."""

    @dataclass
    class ReadAllAvailable(ReadLimit):  # type: ignore[no-redef]
        """Stand-in of PySpark 4.2's class of the same name."""

    @dataclass
    class ReadMinRows(ReadLimit):  # type: ignore[no-redef]
        """Stand-in of PySpark 4.2's class of the same name."""

        min_rows: int

    @dataclass
    class ReadMaxRows(ReadLimit):  # type: ignore[no-redef]
        """Stand-in of PySpark 4.2's class of the same name."""

        max_rows: int

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Stand-in: these releases never call ``prepareForTriggerAvailableNow``."""


if hasattr(datasource, "DataSourceStreamArrowWriter"):
    DataSourceStreamArrowWriter = datasource.DataSourceStreamArrowWriter
else:  # PySpark 4.0

    class DataSourceStreamArrowWriter(  # type: ignore[no-redef]
        datasource.DataSourceStreamWriter, datasource.DataSourceArrowWriter
    ):
        """A stream writer that PySpark 4.0's write worker feeds with Arrow batches."""


def arrow_schema(schema: StructType) -> pa.Schema:
    """``schema`` in Arrow, its timestamps in UTC: how Spark exchanges rows with Python."""
    if "timezone" in inspect.signature(to_arrow_schema).parameters:
        return to_arrow_schema(schema, timezone="UTC")
    return to_arrow_schema(schema, timestamp_utc=True)  # PySpark 4.0 and 4.1


class NextStart:
    """The start of the next micro-batch, for releases whose ``latestOffset()`` gets none: the
    end of the last batch Spark planned, else the initial offset.

    Spark plans every batch with ``partitions(start, end)`` before it asks for the next end, and
    after a restart it calls ``partitions(end, end)`` with the last end in its offset log
    (``setLatestSeenOffset``), so the end seen last is where the next batch starts.

    >>> starts = NextStart()
    >>> starts.get(lambda: {"t": {"0": -1}})
    {'t': {'0': -1}}
    >>> starts.planned({"t": {"0": 40}})
    >>> starts.get(lambda: {"t": {"0": -1}})
    {'t': {'0': 40}}
    """

    def __init__(self) -> None:
        self._end: dict | None = None

    def planned(self, end: dict) -> None:
        self._end = end

    def get(self, initial: Callable[[], dict]) -> dict:
        return self._end if self._end is not None else initial()


def own_limit_warning(
    max_offsets: int | None, *, admission_control: bool = ADMISSION_CONTROL
) -> str | None:
    """The warning for ``maxOffsetsPerTrigger`` where this PySpark gives the source no read
    limit, or None. The source then cannot tell the trigger and caps every batch, while Spark
    runs ``Trigger.Once`` and ``Trigger.AvailableNow`` as one batch: such a run reads one capped
    batch, where Spark's ``kafka`` source reads everything available. (``minOffsetsPerTrigger``
    needs no warning: the first trigger after a start is admitted, so such a run reads all.)"""
    if admission_control or max_offsets is None:
        return None
    return (
        f"kafka-eos source: PySpark {pyspark.__version__} gives Python stream readers no read "
        f"limit, so maxOffsetsPerTrigger={max_offsets} is applied by the source on every "
        "trigger: a Trigger.Once or Trigger.AvailableNow run reads one batch of at most that "
        "many offsets, where Spark's kafka source reads everything available. Install PySpark "
        "4.2 or later (pip install 'pyspark>=4.2,<4.4'), or leave maxOffsetsPerTrigger out of "
        "such runs."
    )
