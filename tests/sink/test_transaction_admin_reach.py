"""How long the driver's admin waits to reach a cluster that does not answer, and what it says.

No broker: a port that refuses connections, which kafka-python retries until its bootstrap
deadline. The committer must wait as long as it retries its EndTxns (``commitTimeoutMs``), not
one request's ``request.timeout.ms``: a decided batch's commit would otherwise give up on a
broker that is back seconds later.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from checkpoint.errors import DeadlineExceeded
from checkpoint.model import Committable, Snapshot
from checkpoint.store import SnapshotStore
from checkpoint.two_phase_commit import TwoPhaseCommit
from connectors.kafka.end_txn import EndTxnOutcome, EndTxnResult, EndTxnTarget
from connectors.kafka.sink import committer as committer_module
from connectors.kafka.sink.committer import KafkaCommitter
from connectors.kafka.sink.naming import TransactionalIdNaming
from connectors.kafka.transactions import TransactionAdmin
from kafka_eos.cluster.ports import free_port

REQUEST_TIMEOUT_MS = 500


@pytest.fixture
def refusing_servers() -> str:
    return f"127.0.0.1:{free_port()}"  # nothing listens on it


def test_an_unreachable_cluster_fails_within_the_request_timeout_naming_key_value_and_fix(
    refusing_servers: str,
) -> None:
    config = {"bootstrap.servers": refusing_servers, "request.timeout.ms": REQUEST_TIMEOUT_MS}
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded) as raised:
        TransactionAdmin(config)
    assert time.monotonic() - started < 5
    message = str(raised.value)
    assert message.startswith("[KAFKA_EOS.CLUSTER.DEADLINE_EXCEEDED]"), message
    assert refusing_servers in message
    assert f"request.timeout.ms = {REQUEST_TIMEOUT_MS}" in message
    assert "commitTimeoutMs" in message and "--timeout" in message
    # kafka-python retries a refused login or handshake as it retries a refused connection.
    assert "security.protocol" in message and "sasl.*" in message


def test_a_failed_build_leaves_no_thread_running(refusing_servers: str) -> None:
    config = {"bootstrap.servers": refusing_servers, "request.timeout.ms": REQUEST_TIMEOUT_MS}
    before = threading.active_count()
    with pytest.raises(DeadlineExceeded):
        TransactionAdmin(config)
    assert threading.active_count() == before


def test_the_committer_reaches_for_the_cluster_as_long_as_its_commit_timeout(
    refusing_servers: str,
) -> None:
    config = {"bootstrap.servers": refusing_servers, "request.timeout.ms": REQUEST_TIMEOUT_MS}
    committer = KafkaCommitter(config, timeout_s=2.0)
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded, match="within 2000 ms"):
        committer.admin  # noqa: B018 - building the admin is the call under test
    assert time.monotonic() - started >= 1.8


def test_a_committer_that_could_not_reach_the_cluster_does_not_wait_again(
    refusing_servers: str,
) -> None:
    """Spark's abort() aborts each committable, then sweeps, on one committer: with the cluster
    out of reach, each would otherwise wait commitTimeoutMs again."""
    config = {"bootstrap.servers": refusing_servers, "request.timeout.ms": REQUEST_TIMEOUT_MS}
    committer = KafkaCommitter(config, timeout_s=1.0)
    with pytest.raises(DeadlineExceeded):
        committer.admin  # noqa: B018
    started = time.monotonic()
    for _ in range(3):
        with pytest.raises(DeadlineExceeded):
            committer.admin  # noqa: B018
    assert time.monotonic() - started < 0.1


def test_commits_that_cannot_reach_the_cluster_are_failures_not_an_escaping_error(
    refusing_servers: str,
) -> None:
    """notify-complete turns the failures into CheckpointCommitFailed, which the sinks report
    as a decided batch not yet committed."""
    config = {"bootstrap.servers": refusing_servers, "request.timeout.ms": REQUEST_TIMEOUT_MS}
    written = [Committable(f"q-{i}", 4000 + i, 0, 10, (("out", i),)) for i in range(2)]
    nothing = Committable.nothing_written("q-2")
    failures = KafkaCommitter(config, timeout_s=0.5).commit_all([*written, nothing])
    assert [tid for tid, _ in failures] == ["q-0", "q-1"]
    assert all(isinstance(exc, DeadlineExceeded) for _, exc in failures)


class _ClusterBack:
    """The admin once the cluster answers again: it takes every EndTxn."""

    def end_transactions(
        self, targets: list[EndTxnTarget], commit: bool, deadline: object
    ) -> dict[str, EndTxnOutcome]:
        return {t.transactional_id: EndTxnOutcome(t, commit, EndTxnResult.ENDED) for t in targets}

    def close(self) -> None:
        pass


def test_a_batch_writes_abort_retries_its_decided_commit_after_its_sweep_gave_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spark calls the batch write's abort() after a commit() that raised: it sweeps, then
    retries the decided commit, which has no restart to finish it. The sweep's failure to
    reach the cluster must not make that retry fail without its own attempt (found by the red
    team of b529e32, which remembered the failure for every later call)."""
    builds: list[int] = []

    def build(config: object, reach_timeout_ms: int = 0) -> _ClusterBack:
        builds.append(reach_timeout_ms)
        if len(builds) == 1:
            raise DeadlineExceeded("no broker answered")
        return _ClusterBack()

    monkeypatch.setattr(committer_module, "TransactionAdmin", build)
    store = SnapshotStore(str(tmp_path))
    decided = Committable("q-batch-0a1b2c3d-0-0", 7, 3, 10, (("out", 0),))
    store.write(Snapshot(0, "q", (decided,), (), None, 1, "spark-batch-write:x"))
    naming = TransactionalIdNaming("q-batch", "0a1b2c3d")
    committer = KafkaCommitter({"bootstrap.servers": "x:1"}, naming, timeout_s=1.0)
    protocol = TwoPhaseCommit(store, committer, pipeline_id="q", sweeps_lingering=True)
    protocol.abort(0, [decided], reason="spark-abort")  # the sweep cannot reach the cluster
    protocol.recover_decided()
    assert builds == [1000, 1000] and store.is_confirmed(0)
