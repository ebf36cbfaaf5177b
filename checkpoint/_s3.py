"""The snapshot store's S3 backend: write-once decisions by conditional put, no rename, no fsync.

S3 has no rename (pyarrow's move is a copy and a delete) and no fsync, and two writers could
both copy into one name. Here a decision is one ``PutObject`` with ``If-None-Match: *``: S3
stores the whole object or nothing, and refuses it (412) if the key exists, so two writers can
never both write decision N. A confirmation is one whole-object put. S3 is strongly consistent
(read-after-write, list-after-write) since December 2020, so a reader after the writer sees it.

boto3 is imported only here, for ``s3://`` (``s3a://``, ``s3n://``) locations. It reads the usual
AWS settings of the process: ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_SESSION_TOKEN``, ``AWS_PROFILE``, ``AWS_REGION``, ``AWS_ENDPOINT_URL_S3`` (or
``AWS_ENDPOINT_URL``), ``AWS_MAX_ATTEMPTS``; Spark's ``spark.hadoop.fs.s3a.*`` never reach it.
"""

from __future__ import annotations

import base64
import hashlib
import os
import threading
import uuid
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from checkpoint.errors import ConfigError, StorageError

# S3 answers 409 ConditionalRequestConflict when a conditional write races another write to
# the key; it asks for a retry, which then gets 412 or succeeds.
_CONFLICT_RETRIES = 5

_SETTINGS = (
    "credentials and endpoint come from this process's environment, not from Spark's "
    "spark.hadoop.fs.s3a.* settings: set AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (or "
    "AWS_PROFILE, or an instance role), AWS_REGION and, for a non-AWS endpoint, "
    "AWS_ENDPOINT_URL_S3 in the driver's environment (docs/sink.md#storage)"
)


# One client per process and AWS environment: a boto3 session costs about 0.1 s of CPU, and the
# sink opens a store and reads Spark's log several times a batch. Clients are thread-safe.
_clients: dict[tuple[tuple[str, str], ...], Any] = {}
# (endpoint settings, bucket) whose conditional puts were seen refused once: probed once each.
_honours_if_none_match: set[tuple[tuple[tuple[str, str], ...], str]] = set()
_lock = threading.Lock()


def _aws_environment() -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("AWS_")))


def _client() -> Any:
    environment = _aws_environment()
    with _lock:
        if environment not in _clients:
            _clients[environment] = boto3.session.Session().client(
                "s3",
                config=Config(
                    # Standard retries: 500, 503 SlowDown and throttling, with backoff
                    # (AWS_MAX_ATTEMPTS).
                    retries={"mode": "standard"},
                    # No aws-chunked uploads with trailing checksums, which some S3-compatible
                    # stores keep inside the object (boto/boto3#4435): a decision that cannot
                    # be read back. Each put sends Content-MD5, which S3 checks, instead.
                    request_checksum_calculation="when_required",
                    response_checksum_validation="when_required",
                ),
            )
        return _clients[environment]


class S3FileSystem:
    """Keys of one bucket through boto3; paths are ``bucket/key`` as pyarrow names them."""

    def __init__(self, location: str) -> None:
        self._location = location
        self._client = _client()

    def read(self, path: str) -> bytes:
        response = self._call("GetObject", path, missing_ok=True)
        if response is None:
            raise FileNotFoundError(path)
        try:
            return bytes(response["Body"].read())
        except (BotoCoreError, OSError) as error:  # the answer broke off mid-body
            raise self._error("GetObject", path, error) from error

    def create(self, path: str, data: bytes) -> None:
        """Publish ``path`` only if it does not exist: FileExistsError if it does, even when
        another writer put it a moment ago. A retry of a put that S3 stored but whose answer
        was lost also gets FileExistsError; the store then compares the content."""
        self._check_conditional_puts(path)
        for attempt in range(1, _CONFLICT_RETRIES + 1):
            try:
                self._put(path, data, IfNoneMatch="*", raw=True)
                return
            except ClientError as error:
                status = _status(error)
                if status == 412:
                    raise FileExistsError(path) from error
                if status != 409 or attempt == _CONFLICT_RETRIES:
                    raise self._error("PutObject", path, error) from error

    def write_atomic(self, path: str, data: bytes) -> None:
        """A whole-object put: S3 publishes all of it or nothing."""
        self._put(path, data)

    def _put(self, path: str, data: bytes, **kw: Any) -> Any:
        md5 = base64.b64encode(hashlib.md5(data).digest()).decode()  # S3 checks Content-MD5
        return self._call("PutObject", path, Body=data, ContentMD5=md5, **kw)

    def _check_conditional_puts(self, path: str) -> None:
        """Refuse a store that ignores ``If-None-Match``, once per process and bucket: there
        two writers of one decision would both succeed, the second overwriting the first."""
        bucket, key = _split(path)
        seen = (_aws_environment(), bucket)
        if seen in _honours_if_none_match:
            return
        probe = f"{bucket}/{key.rpartition('/')[0]}/.kafka-eos-probe-{uuid.uuid4().hex}"
        try:
            self._put(probe, b"", IfNoneMatch="*")
            try:
                self._put(probe, b"", IfNoneMatch="*", raw=True)
            except ClientError as error:
                if _status(error) == 412:
                    _honours_if_none_match.add(seen)
                    return
                raise self._error("PutObject", probe, error) from error
        finally:
            self._call("DeleteObject", probe)
        raise ConfigError(
            f"the S3 store of {self._location!r} ignores conditional writes: a second "
            "PutObject with If-None-Match: * on one key succeeded. The decisions there would "
            "not be write-once (two drivers could both decide a batch). Use a store that "
            "honours If-None-Match (AWS S3 does since August 2024), or keep the checkpoint on "
            "HDFS or a local disk"
        )

    def exists(self, path: str) -> bool:
        return self._call("HeadObject", path, missing_ok=True) is not None

    def list(self, directory: str) -> list[str]:
        bucket, prefix = _split(directory)
        prefix = f"{prefix}/" if prefix else ""
        pages = self._client.get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=prefix, Delimiter="/"
        )
        try:
            return [o["Key"][len(prefix) :] for page in pages for o in page.get("Contents", ())]
        except (ClientError, BotoCoreError) as error:
            raise self._error("ListObjectsV2", directory, error) from error

    def delete(self, path: str) -> None:
        self._call("DeleteObject", path)  # S3 answers 204 for a missing key too

    def _call(
        self, operation: str, path: str, *, missing_ok: bool = False, raw: bool = False, **kw: Any
    ) -> Any:
        """``operation`` on ``path``; None if absent and ``missing_ok``. ``raw``: a
        ClientError is raised as is, for the caller to read its status."""
        bucket, key = _split(path)
        method = getattr(self._client, _snake(operation))
        try:
            return method(Bucket=bucket, Key=key, **kw)
        except ClientError as error:
            if missing_ok and _code(error) in ("NoSuchKey", "404"):
                return None
            if raw:
                raise
            raise self._error(operation, path, error) from error
        except BotoCoreError as error:  # no answer: no endpoint, no credentials, a timeout
            raise self._error(operation, path, error) from error

    def _error(self, operation: str, path: str, error: Exception) -> StorageError:
        if hasattr(error, "response"):
            said = str(error.response.get("Error", {}).get("Message", "")).rstrip(".")
            answer = f"HTTP {_status(error)} {_code(error)}: {said}"
        else:
            answer = f"no answer ({error})"
        return StorageError(self._location, f"s3://{path}", operation, answer, _SETTINGS)


def _split(path: str) -> tuple[str, str]:
    bucket, _, key = path.partition("/")
    return bucket, key


def _snake(operation: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in operation).lstrip("_")


def _status(error: ClientError) -> int | None:
    return error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))
