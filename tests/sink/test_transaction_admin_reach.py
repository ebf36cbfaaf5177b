"""How long the driver's admin waits to reach a cluster that does not answer, and what it says.

No broker: a port that refuses connections, which kafka-python retries until its bootstrap
deadline. The committer must wait as long as it retries its EndTxns (``commitTimeoutMs``), not
one request's ``request.timeout.ms``: a decided batch's commit would otherwise give up on a
broker that is back seconds later.
"""

from __future__ import annotations

import socket
import threading
import time

import pytest

from checkpoint.errors import DeadlineExceeded
from checkpoint.model import Committable
from connectors.kafka.sink.committer import KafkaCommitter
from connectors.kafka.transactions import TransactionAdmin

REQUEST_TIMEOUT_MS = 500


@pytest.fixture
def refusing_servers() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"127.0.0.1:{port}"


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
