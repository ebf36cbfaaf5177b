"""Spark's lag metrics derived from a query's progress (connectors.spark.lag), on progress
objects as PySpark's listener gets them; a real query's progress is checked in
integration_tests/source/test_source_rate_limits.py."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from connectors.spark import lag
from connectors.spark.lag import KafkaLagListener, OffsetsBehindLatest, offsets_behind_latest

END = '{"orders": {"0": 100, "1": 200, "2": 300}}'


def test_lag_is_latest_less_the_end_per_partition_as_spark_computes_it() -> None:
    latest = '{"orders": {"0": 130, "1": 200, "2": 312}}'
    behind = offsets_behind_latest(END, latest)
    assert behind == OffsetsBehindLatest(min=0, max=30, avg=14.0)
    assert behind.as_metrics() == {
        "minOffsetsBehindLatest": "0",
        "maxOffsetsBehindLatest": "30",
        "avgOffsetsBehindLatest": "14.0",
    }


def test_a_partition_missing_from_latest_counts_as_caught_up_and_never_negative() -> None:
    assert offsets_behind_latest(END, '{"orders": {"0": 90}}') == OffsetsBehindLatest(0, 0, 0.0)


@pytest.mark.parametrize(
    ("end", "latest"),
    [(END, None), (None, END), ("{}", END), ('{"n": 3}', END), (END, "not json"), (END, "[1]")],
)
def test_anything_but_kafka_offsets_has_no_lag(end: str | None, latest: str | None) -> None:
    assert offsets_behind_latest(end, latest) is None


def _progress(query_id: str, *sources: tuple[str, str | None]) -> SimpleNamespace:
    return SimpleNamespace(
        progress=SimpleNamespace(
            id=query_id,
            sources=[SimpleNamespace(endOffset=e, latestOffset=x) for e, x in sources],
        )
    )


def test_the_listener_keeps_and_logs_the_lag_of_each_kafka_source(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(lag.compat, "ADMISSION_CONTROL", True)
    listener = KafkaLagListener()
    rate = ('{"offset": 5}', '{"offset": 9}')  # a source that is not Kafka: left out
    with caplog.at_level(logging.INFO, logger="connectors.spark.lag"):
        listener.onQueryProgress(_progress("q1", (END, '{"orders": {"0": 110}}'), rate))
    assert listener.latest == {"q1": [OffsetsBehindLatest(0, 10, 10 / 3)]}
    assert "maxOffsetsBehindLatest': '10'" in caplog.text
    listener.onQueryTerminated(SimpleNamespace(id="q1"))
    assert listener.latest == {}


def test_before_pyspark_4_2_the_listener_says_once_that_lag_cannot_be_told(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """PySpark 4.0 and 4.1 copy the batch's end into latestOffset: a lag of 0 would lie."""
    monkeypatch.setattr(lag.compat, "ADMISSION_CONTROL", False)
    monkeypatch.setattr(lag.pyspark, "__version__", "4.1.1")
    listener = KafkaLagListener()
    with caplog.at_level(logging.INFO, logger="connectors.spark.lag"):
        listener.onQueryStarted(SimpleNamespace(id="q1"))
        listener.onQueryProgress(_progress("q1", (END, END)))
    assert listener.latest == {}
    [record] = caplog.records
    assert record.levelno == logging.WARNING and "4.1.1 does not report" in record.message
