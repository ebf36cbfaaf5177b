"""Spark's lag metrics for a kafka-eos source, derived from a query's progress.

Spark's own ``kafka`` source puts ``minOffsetsBehindLatest``, ``maxOffsetsBehindLatest`` and
``avgOffsetsBehindLatest`` in each progress's ``sources[i].metrics``; dashboards and alerts are
built on them. A Python data source cannot: PySpark 4.0 to 4.3 give it no metrics call, and
Spark leaves the map empty. From PySpark 4.2 its ``latestOffset`` is in the progress, though
(the kafka-eos source reports the high watermarks, so a transaction that holds the last stable
offset back counts as lag), and the same three numbers follow from it, per partition the latest
offset less the batch's end, as Spark computes them: :func:`offsets_behind_latest` for one
source's progress, and :class:`KafkaLagListener` to log them for every query of a session.
PySpark 4.0 and 4.1 copy the end into ``latestOffset``: lag cannot be told there.

>>> offsets_behind_latest('{"t": {"0": 10, "1": 20}}', '{"t": {"0": 15, "1": 20}}')
OffsetsBehindLatest(min=0, max=5, avg=2.5)
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

import pyspark
from pyspark.sql.streaming import StreamingQueryListener

from connectors.spark import compat

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OffsetsBehindLatest:
    """Spark's three lag metrics of one source at one trigger."""

    min: int
    max: int
    avg: float

    def as_metrics(self) -> dict[str, str]:
        """Under Spark's names, as strings, as its ``kafka`` source's ``metrics`` map has them."""
        return {
            "minOffsetsBehindLatest": str(self.min),
            "maxOffsetsBehindLatest": str(self.max),
            "avgOffsetsBehindLatest": str(self.avg),
        }


def offsets_behind_latest(
    end_offset: str | None, latest_offset: str | None
) -> OffsetsBehindLatest | None:
    """The lag of one source's progress (its ``endOffset`` and ``latestOffset`` JSON), over
    the partitions the batch ended in; None when either is missing or not Kafka offsets."""
    end, latest = _offsets(end_offset), _offsets(latest_offset)
    if not end or latest is None:
        return None
    behind = [max(0, latest.get(key, offset) - offset) for key, offset in end.items()]
    return OffsetsBehindLatest(min(behind), max(behind), sum(behind) / len(behind))


def _offsets(text: str | None) -> dict[tuple[str, str], int] | None:
    """``{"topic": {"0": 42}}`` per (topic, partition); None for anything else."""
    try:
        parsed = json.loads(text) if text else None
        if not isinstance(parsed, dict):
            return None
        return {(t, p): int(o) for t, parts in parsed.items() for p, o in parts.items()}
    except (ValueError, TypeError, AttributeError):
        return None


class KafkaLagListener(StreamingQueryListener):
    """Logs Spark's three lag metrics of every Kafka source at each progress of every query
    (logger ``connectors.spark.lag``, INFO) and keeps the last ones per query id in
    ``latest``. Add it with ``spark.streams.addListener(KafkaLagListener())``; on PySpark
    before 4.2 it says once that lag cannot be told, and does nothing else."""

    def __init__(self) -> None:
        super().__init__()
        self.latest: dict[str, list[OffsetsBehindLatest]] = {}
        # reportLatestOffset came with admission control for Python stream readers (4.2).
        self._blind = not compat.ADMISSION_CONTROL

    def onQueryStarted(self, event: Any) -> None:
        if self._blind:
            _log.warning(
                "PySpark %s does not report a Python source's latest offsets (4.2 does): "
                "kafka-eos lag cannot be derived from the progress of query %s",
                pyspark.__version__,
                event.id,
            )

    def onQueryProgress(self, event: Any) -> None:
        if self._blind:
            return
        progress = event.progress
        lags = [
            lag
            for source in progress.sources
            if (lag := offsets_behind_latest(source.endOffset, source.latestOffset)) is not None
        ]
        self.latest[str(progress.id)] = lags
        for index, lag in enumerate(lags):
            _log.info("query %s, source %d: %s", progress.id, index, lag.as_metrics())

    def onQueryTerminated(self, event: Any) -> None:
        self.latest.pop(str(event.id), None)
