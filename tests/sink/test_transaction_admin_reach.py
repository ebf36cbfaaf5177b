"""How long the driver's admin waits to reach a cluster that does not answer, and what it says.

No broker: a port that refuses connections, which kafka-python retries until its bootstrap
deadline. The committer must wait as long as it retries its EndTxns (``commitTimeoutMs``), not
one request's ``request.timeout.ms``: a decided batch's commit would otherwise give up on a
broker that is back seconds later.
"""

from __future__ import annotations

import socket
import time

import pytest

from checkpoint.errors import DeadlineExceeded
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


def test_the_committer_reaches_for_the_cluster_as_long_as_its_commit_timeout(
    refusing_servers: str,
) -> None:
    config = {"bootstrap.servers": refusing_servers, "request.timeout.ms": REQUEST_TIMEOUT_MS}
    committer = KafkaCommitter(config, timeout_s=2.0)
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded, match="within 2000 ms"):
        committer.admin  # noqa: B018 - building the admin is the call under test
    assert time.monotonic() - started >= 1.8
