"""The broker is a faithful transactional Kafka, in every way this project runs it.

One topic holds a committed, an aborted and a still-open transaction. A ``read_committed``
reader must see only the committed records and stop before the open transaction; a
``read_uncommitted`` reader must see all three. A fake broker that hands aborted records to
read_committed readers fails here.
"""

from __future__ import annotations

import pytest

from integration_tests.conftest import create_topic, write_transaction
from integration_tests.kafka_fixtures import running_cluster
from kafka_eos.cluster import DEFAULT_KAFKA_VERSION, SUPPORTED_KAFKA_VERSIONS
from kafka_eos.operations.drain import drain

pytestmark = pytest.mark.kafka


def _values(bootstrap: str, topic: str, isolation: str) -> list[str]:
    return [r.value.decode() for r in drain(bootstrap, topic, isolation, timeout_s=30)]


# Every supported release in Docker (the image CI uses), the default one as local processes too.
@pytest.mark.parametrize(
    ("mode", "version"),
    [*(("docker", v) for v in SUPPORTED_KAFKA_VERSIONS), ("process", DEFAULT_KAFKA_VERSION)],
)
def test_read_committed_sees_only_committed_and_stops_at_open_transaction(
    mode: str, version: str
) -> None:
    if mode == "docker":
        from integration_tests.kafka_containers import docker_engine_reachable

        if not docker_engine_reachable():
            pytest.fail("no Docker engine reachable: run scripts/docker-engine.sh start")
    with running_cluster(mode, version) as kafka:
        bootstrap = kafka.bootstrap_servers
        topic = create_topic(bootstrap)
        write_transaction(bootstrap, topic, ["c1", "c2", "c3"], commit=True)
        write_transaction(bootstrap, topic, ["a1", "a2"], commit=False)
        still_open = write_transaction(bootstrap, topic, ["o1", "o2"], commit=None)
        # Written after the open transaction began: read_committed must not get past it yet.
        write_transaction(bootstrap, topic, ["late"], commit=True)

        assert _values(bootstrap, topic, "read_committed") == ["c1", "c2", "c3"]
        assert _values(bootstrap, topic, "read_uncommitted") == [
            "c1", "c2", "c3", "a1", "a2", "o1", "o2", "late",
        ]  # fmt: skip

        still_open.commit_transaction(30)
        assert _values(bootstrap, topic, "read_committed") == ["c1", "c2", "c3", "o1", "o2", "late"]
        still_open.close()  # before the cluster stops: its threads would go on connecting
