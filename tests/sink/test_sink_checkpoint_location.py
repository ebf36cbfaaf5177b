"""The sink keeps its decisions on the storage of Spark's own checkpoint, or refuses to commit.

Spark reads a checkpoint location without a scheme on the cluster's default filesystem
(often HDFS), the sink on the driver's local disk: decisions kept where Spark's checkpoint is
not would be gone after a driver restart on another host, and a half-committed batch would
run again. Spark logs ``offsets/<N>`` before batch N runs, so the sink checks it sees it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from checkpoint.errors import ConfigError
from connectors.spark.query_log import spark_plan_of, spark_query_id


def _sink(location: str) -> str:
    return location


def test_the_batch_spark_logged_is_seen(tmp_path: Path) -> None:
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "7").write_text("v1")
    plan = spark_plan_of(_sink(str(tmp_path)), 7)
    assert plan.startswith("sha256:")
    assert spark_plan_of(_sink(f"file://{tmp_path}/"), 7) == plan


def test_a_batch_planned_anew_has_another_plan(tmp_path: Path) -> None:
    """Spark's offsets/N holds the batch's timestamp: a batch id planned again after its log
    entry was deleted never gets the fingerprint of the first plan."""
    (tmp_path / "offsets").mkdir()
    entry = tmp_path / "offsets" / "7"
    entry.write_text('v1\n{"batchTimestampMs":1}\n{"numbers":100}')
    first = spark_plan_of(_sink(str(tmp_path)), 7)
    entry.write_text('v1\n{"batchTimestampMs":2}\n{"numbers":100}')
    assert spark_plan_of(_sink(str(tmp_path)), 7) != first


def test_a_checkpoint_on_other_storage_is_refused_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as refused:
        spark_plan_of(_sink(str(tmp_path)), 7)
    message = str(refused.value)
    assert f"option 'checkpointLocation' = '{tmp_path}'" in message
    assert f"does not see {tmp_path}/offsets/7" in message
    assert "fs.defaultFS" in message and "hdfs://namenode:8020/checkpoints/q" in message


def test_the_query_id_comes_from_sparks_metadata(tmp_path: Path) -> None:
    """The owner of the query's transactional ids: the same after a restart however the
    location is spelled, because it is read, not derived from the spelling."""
    (tmp_path / "metadata").write_text('{"id":"da5d7a29-cdca-4238-9236-4b1a56727dae"}\n')
    for spelled in (str(tmp_path), f"{tmp_path}/", f"file://{tmp_path}", f"file:{tmp_path}"):
        assert spark_query_id(_sink(spelled)) == "da5d7a29-cdca-4238-9236-4b1a56727dae"


def test_damaged_spark_metadata_is_refused_with_the_fix(tmp_path: Path) -> None:
    (tmp_path / "metadata").write_text("not json")
    with pytest.raises(ConfigError) as damaged:
        spark_query_id(_sink(str(tmp_path)))
    assert "not a query id" in str(damaged.value) and "restore it from a backup" in str(
        damaged.value
    )
    (tmp_path / "metadata").unlink()
    with pytest.raises(ConfigError) as missing:
        spark_query_id(_sink(str(tmp_path)))
    assert f"does not see {tmp_path}/metadata" in str(missing.value)
