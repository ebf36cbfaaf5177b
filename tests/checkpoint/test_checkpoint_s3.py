"""The snapshot store on S3, against a real S3 API server (moto in server mode): write-once
decisions by conditional put, read-after-write, and a server that answers 503 mid-write."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

pytest.importorskip("moto.server", reason="needs the test extras: pip install -e '.[test]'")

import boto3
from s3_server import FaultProxy, aws_environment, s3_server

from checkpoint.errors import ConfigError, ProtocolError, StorageError
from checkpoint.model import Committable, Snapshot
from checkpoint.store import SnapshotStore, read_location

BUCKET = "kafka-eos-checkpoints"


def snapshot(cid: int, owner: str = "pipeline") -> Snapshot:
    committable = Committable(f"{owner}-0-{cid}", 7, 0, 10, (("out", 0),))
    return Snapshot(cid, owner, (committable,), (("in", 0, cid * 100),), 1, 2)


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    with s3_server() as endpoint:
        client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
        )
        client.create_bucket(Bucket=BUCKET)
        yield endpoint


@pytest.fixture
def proxy(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultProxy]:
    """Every store of the test talks to moto through a fault proxy, configured as a user would
    configure the store: through the AWS environment variables."""
    faults = FaultProxy(moto_endpoint)
    with faults.running() as endpoint:
        for key, value in aws_environment(endpoint).items():
            monkeypatch.setenv(key, value)
        monkeypatch.setenv("AWS_MAX_ATTEMPTS", "3")
        yield faults


@pytest.fixture
def location(request: pytest.FixtureRequest, proxy: FaultProxy) -> str:
    return f"s3a://{BUCKET}/{request.node.name.replace('[', '-').rstrip(']')}/kafka-eos"


def keys(location: str) -> list[str]:
    prefix = location.removeprefix(f"s3a://{BUCKET}/")
    listing = boto3.client("s3").list_objects_v2(Bucket=BUCKET, Prefix=prefix)
    return sorted(o["Key"].removeprefix(prefix + "/") for o in listing.get("Contents", ()))


def test_round_trip_with_no_temporaries(location: str, proxy: FaultProxy) -> None:
    store = SnapshotStore(location, retain=1)
    assert store.latest() is None and store.checkpoint_ids() == []
    for cid in (1, 2):
        store.write(snapshot(cid))
        store.confirm(cid, confirmed_at_ms=3)
    store.write(snapshot(3))
    assert store.checkpoint_ids() == [1, 2, 3] and store.unconfirmed_ids() == [3]
    assert store.get(2) == snapshot(2) and store.confirmation(2).confirmed_at_ms == 3
    assert store.prune() == [1, 2]
    # One put per file: no temporary ever published, nothing moved (a copy and a delete).
    assert keys(location) == ["3.snapshot.json"]
    assert not [r for r in proxy.requests if "x-amz-copy-source" in r[1] or ".tmp-" in r[1]]
    assert read_location(f"{location}/3.snapshot.json") == read_location(
        location.replace("s3a://", "s3://") + "/3.snapshot.json"
    )
    assert read_location(f"{location}/4.snapshot.json") is None


def test_a_reader_after_the_writer_sees_the_decision(location: str) -> None:
    writer, reader = SnapshotStore(location), SnapshotStore(location)
    assert reader.get(5) is None
    writer.write(snapshot(5))
    assert reader.contains(5) and reader.get(5) == snapshot(5)
    assert reader.unconfirmed_ids() == [5]
    writer.confirm(5)
    assert reader.is_confirmed(5) and reader.unconfirmed_ids() == []


def test_a_decision_written_twice_is_refused(location: str) -> None:
    store = SnapshotStore(location)
    store.write(snapshot(0))
    store.write(snapshot(0))  # the same decision again: a no-op
    with pytest.raises(ProtocolError, match=r"checkpoint 0 is already decided in .*0\.snapshot"):
        store.write(snapshot(0, owner="other-run"))
    assert SnapshotStore(location).get(0) == snapshot(0)


def test_a_writer_whose_check_came_before_another_write_is_refused(location: str) -> None:
    """Writer B checks that decision 7 is free, then A writes it, then B puts its own: S3's
    conditional put refuses B, which is told, and A's decision stays."""
    a, b = SnapshotStore(location), SnapshotStore(location)
    create = b._fs.create

    def a_writes_first(path: str, data: bytes) -> None:
        a.write(snapshot(7, owner="a"))
        create(path, data)

    b._fs.create = a_writes_first  # type: ignore[method-assign]
    with pytest.raises(ProtocolError, match="already decided"):
        b.write(snapshot(7, owner="b"))
    assert SnapshotStore(location).get(7) == snapshot(7, owner="a")


def race(location: str, cid: int) -> dict[str, object]:
    """Writers "a" and "b", each with its own store, write decision ``cid`` at once."""
    start = threading.Barrier(2)
    outcome: dict[str, object] = {}

    def write(owner: str) -> None:
        store = SnapshotStore(location)
        start.wait()
        try:
            store.write(snapshot(cid, owner=owner))
            outcome[owner] = "won"
        except ProtocolError as error:
            outcome[owner] = error

    threads = [threading.Thread(target=write, args=(owner,)) for owner in "ab"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcome


def test_two_writers_racing_exactly_one_wins(location: str) -> None:
    for cid in range(10):
        outcome = race(location, cid)
        winners = [owner for owner, result in outcome.items() if result == "won"]
        assert len(winners) == 1, outcome
        assert SnapshotStore(location).get(cid) == snapshot(cid, owner=winners[0])


def test_a_put_refused_with_503_is_not_reported_durable(location: str, proxy: FaultProxy) -> None:
    store = SnapshotStore(location)
    proxy.fail("PUT", "/kafka-eos/4.snapshot.json", times=3, forward=False)  # every attempt
    with pytest.raises(StorageError) as raised:
        store.write(snapshot(4))
    message = str(raised.value)
    assert raised.value.code == "KAFKA_EOS.CHECKPOINT.STORAGE_FAILED"
    for part in (location, f"s3://{BUCKET}/", "4.snapshot.json", "HTTP 503 SlowDown"):
        assert part in message
    assert "AWS_ENDPOINT_URL_S3" in message and "spark.hadoop.fs.s3a" in message
    assert SnapshotStore(location).get(4) is None and keys(location) == []
    store.write(snapshot(4))  # the store answers again: the retry writes it once
    assert SnapshotStore(location).get(4) == snapshot(4)


def test_a_put_stored_but_answered_503_is_retried_safely(location: str, proxy: FaultProxy) -> None:
    """S3 stored the decision, but its answer was a 503: the client's retry meets its own
    decision (412), which the store reads back, finds identical and reports written."""
    proxy.fail("PUT", "/kafka-eos/6.snapshot.json", times=1, forward=True)
    SnapshotStore(location).write(snapshot(6))
    puts = [r for r in proxy.requests if r[0] == "PUT" and "6.snapshot.json" in r[1]]
    assert [status for _, _, status in puts] == [503, 412]
    assert SnapshotStore(location).get(6) == snapshot(6)
    with pytest.raises(ProtocolError, match="already decided"):
        SnapshotStore(location).write(snapshot(6, owner="other-run"))


def test_a_missing_bucket_names_the_key_and_the_answer(proxy: FaultProxy) -> None:
    with pytest.raises(StorageError, match=r"GetObject of s3://no-such-bucket-1/q/3\.snapshot"):
        SnapshotStore("s3a://no-such-bucket-1/q").get(3)
    with pytest.raises(StorageError, match="HTTP 404 NoSuchBucket"):
        SnapshotStore("s3a://no-such-bucket-1/q").write(snapshot(3))


def test_a_store_that_ignores_conditional_writes_is_refused(
    location: str, proxy: FaultProxy
) -> None:
    """An S3-compatible store without If-None-Match would let two drivers both write one
    decision, the second overwriting the first: the probe before the first decision refuses it,
    and leaves nothing behind."""
    proxy.strip = frozenset({"if-none-match"})
    with pytest.raises(ConfigError, match="ignores conditional writes"):
        SnapshotStore(location).write(snapshot(2))
    assert keys(location) == []


def test_a_decision_is_put_whole_with_its_md5(location: str, proxy: FaultProxy) -> None:
    """No aws-chunked upload with a trailing checksum, which some S3-compatible stores keep
    inside the object (a decision that cannot be read back); S3 checks Content-MD5 instead."""
    SnapshotStore(location).write(snapshot(8))
    puts = [
        headers
        for (method, path, _), headers in zip(proxy.requests, proxy.headers, strict=True)
        if method == "PUT" and path.split("?")[0].endswith("/8.snapshot.json")
    ]
    assert len(puts) == 1
    assert "content-md5" in puts[0]
    assert "aws-chunked" not in puts[0].get("content-encoding", "")
    assert "x-amz-trailer" not in puts[0]


def test_one_boto3_session_serves_a_process(location: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A session costs about 0.1 s of CPU, and the sink opens stores and reads Spark's log
    several times a batch."""
    sessions: list[object] = []
    session = boto3.session.Session

    def counted() -> object:
        sessions.append(object())
        return session()

    monkeypatch.setattr(boto3.session, "Session", counted)
    for cid in (11, 12, 13):
        SnapshotStore(location).write(snapshot(cid))
        assert read_location(f"{location}/{cid}.snapshot.json") is not None
    assert len(sessions) <= 1
