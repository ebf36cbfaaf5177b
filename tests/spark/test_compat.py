"""Feature detection across PySpark 4.0 to 4.3 (connectors.spark.compat): pure logic, and what
the installed PySpark's workers need of the classes it picks."""

from __future__ import annotations

import inspect

import pyarrow as pa
import pyspark
from pyspark.sql import datasource
from pyspark.sql.types import StructField, StructType, TimestampType

from connectors.spark.compat import (
    ADMISSION_CONTROL,
    DataSourceStreamArrowWriter,
    NextStart,
    arrow_schema,
    own_limit_warning,
)
from connectors.spark.source import KafkaStreamReader


def test_the_next_start_is_the_initial_offset_until_a_batch_is_planned() -> None:
    starts = NextStart()
    assert starts.get(lambda: {"t": {"0": -2}}) == {"t": {"0": -2}}
    starts.planned({"t": {"0": 10}})
    starts.planned({"t": {"0": 25}})  # the last planned end, e.g. a restart's (end, end)

    def initial() -> dict:
        raise AssertionError("the initial offset is not asked once a batch was planned")

    assert starts.get(initial) == {"t": {"0": 25}}


def test_no_warning_where_spark_passes_the_limit() -> None:
    assert own_limit_warning(10, admission_control=True) is None


def test_no_warning_without_a_cap() -> None:
    assert own_limit_warning(None, admission_control=False) is None


def test_the_warning_names_the_option_the_version_and_the_fix() -> None:
    warning = own_limit_warning(10, admission_control=False)
    assert warning is not None
    assert "maxOffsetsPerTrigger=10" in warning
    assert f"PySpark {pyspark.__version__}" in warning
    assert "Trigger.AvailableNow" in warning
    assert "pyspark>=4.2" in warning


def test_latest_offset_takes_a_start_and_a_limit_and_works_without() -> None:
    """PySpark 4.2 and later give admission control to a reader whose latestOffset has
    parameters; 4.0 and 4.1 call it with none."""
    parameters = list(inspect.signature(KafkaStreamReader.latestOffset).parameters.values())
    assert [p.name for p in parameters] == ["self", "start", "limit"]
    assert all(p.default is None for p in parameters[1:])


def test_the_stream_writer_gets_arrow_batches_on_this_pyspark() -> None:
    """PySpark 4.0's write worker hands Arrow batches only to a DataSourceArrowWriter."""
    native = hasattr(datasource, "DataSourceStreamArrowWriter")
    assert issubclass(DataSourceStreamArrowWriter, datasource.DataSourceStreamWriter)
    assert native or issubclass(DataSourceStreamArrowWriter, datasource.DataSourceArrowWriter)


def test_admission_control_matches_the_module() -> None:
    try:
        import pyspark.sql.streaming.datasource  # noqa: F401
    except ModuleNotFoundError:
        assert not ADMISSION_CONTROL
    else:
        assert ADMISSION_CONTROL


def test_timestamps_are_utc_in_arrow() -> None:
    schema = arrow_schema(StructType([StructField("timestamp", TimestampType())]))
    assert schema.field("timestamp").type == pa.timestamp("us", tz="UTC")
