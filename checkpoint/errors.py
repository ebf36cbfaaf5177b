"""Errors of kafka-eos. One root, :class:`KafkaEosError`, so callers can catch the whole project.

Every message says what happened, the value seen, what was expected and how to fix it, because
these errors surface in Spark driver logs far from the code that raised them. Connectors subclass
these classes; they never raise bare ``Exception``.

Every class has a stable ``code`` (``KAFKA_EOS.<AREA>.<NAME>``) that starts its message, as in
``[KAFKA_EOS.SINK.TRANSACTION_LOST] transaction ...``, so logs and runbooks can be searched by
it. Codes are API: once released, a code never changes meaning. docs/errors.md lists them all
(a unit test keeps the two in step).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar


class AbortReason(StrEnum):
    """Why a checkpoint was aborted; the string value is the stable code in errors and logs."""

    DECLINED = "declined"
    TIMEOUT = "timeout"
    PREDECESSOR_ABORTED = "predecessor-aborted"
    STALE = "stale"
    REQUESTED = "requested"
    RECOVERY = "recovery"


def _rebuild(cls: type[KafkaEosError], message: str, state: dict[str, Any]) -> KafkaEosError:
    """Unpickle without calling ``__init__``, whose signature differs per subclass.

    ``message`` is the raw message, without the ``[code]`` prefix that ``__str__`` adds."""
    error = cls.__new__(cls)
    Exception.__init__(error, message)
    error.__dict__.update(state)
    return error


class KafkaEosError(Exception):
    """Root of every kafka-eos error.

    Picklable with its attributes, since Spark ships task errors from executors to the driver.
    ``str()`` starts with the class's stable ``code`` in brackets.
    """

    code: ClassVar[str] = "KAFKA_EOS.INTERNAL"
    """Stable code of this class (docs/errors.md); each subclass sets its own."""

    @property
    def message(self) -> str:
        """The message without the ``[code]`` prefix."""
        return super().__str__()

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.message, dict(self.__dict__)))


class ConfigError(KafkaEosError, ValueError):
    """A setting has an invalid value; the message names the setting, the value and the range."""

    code = "KAFKA_EOS.CONFIG.INVALID"


class ProtocolError(KafkaEosError):
    """A caller broke the checkpoint protocol, e.g. an acknowledgement from an unknown participant.

    This is a bug in the caller, never a transient condition: do not retry.
    """

    code = "KAFKA_EOS.CHECKPOINT.PROTOCOL_VIOLATION"


class FormatError(KafkaEosError, ValueError):
    """A persisted or serialized form (committable, snapshot, confirmation) cannot be decoded."""

    code = "KAFKA_EOS.CHECKPOINT.INVALID_FORMAT"


class StorageError(KafkaEosError, OSError):
    """The store's storage refused or failed an operation (after its client's retries).

    What it was writing may be durable or not (a put whose answer was lost): recovery reads
    the store again and decides; a retry is safe (decisions are write-once).
    """

    code = "KAFKA_EOS.CHECKPOINT.STORAGE_FAILED"

    def __init__(self, location: str, path: str, operation: str, answer: str, fix: str) -> None:
        super().__init__(
            f"{operation} of {path} (store at {location!r}) failed: {answer}. If it is "
            f"transient, restart the query (a decision is written once, so a retry is safe); "
            f"otherwise fix access: {fix}"
        )
        self.location, self.path, self.operation, self.answer = location, path, operation, answer


class UnsupportedFormatVersion(FormatError):
    """The data was written in a format version this release cannot read."""

    code = "KAFKA_EOS.CHECKPOINT.UNSUPPORTED_FORMAT_VERSION"

    def __init__(
        self, kind: str, seen: object, supported: tuple[int, ...], path: str | None = None
    ):
        self.kind = kind
        self.seen = seen
        self.supported = supported
        self.path = path
        where = f" in {path}" if path else ""
        if seen is None:
            what = f'{kind} has no "version" field{where}'
        else:
            what = f"{kind} format version {seen!r}{where} is not supported"
        super().__init__(
            f"{what}; this kafka-eos reads versions {list(supported)}. "
            "Upgrade kafka-eos to the release that wrote it, or restore a file it wrote."
        )


class CorruptSnapshotError(FormatError):
    """A checkpoint file is truncated or damaged; its checksum or JSON does not verify."""

    code = "KAFKA_EOS.CHECKPOINT.CORRUPT_FILE"

    def __init__(self, path: str, detail: str) -> None:
        self.path = path
        self.detail = detail
        super().__init__(
            f"checkpoint file {path} is corrupt: {detail}. Files are written to a hidden temporary "
            "name and moved into place, so a crash cannot leave a partial file under this name: "
            "it was damaged afterwards. Restore it from a backup. Delete it only if you are sure "
            "its transactions were never committed to Kafka; the store then falls back to the "
            "previous checkpoint."
        )


class CheckpointRejected(KafkaEosError):
    """A trigger (minimum pause, concurrency limit) or an acknowledgement (a failed commit
    awaits ``recover()``) was refused for now; retry after a while, or after ``recover()``."""

    code = "KAFKA_EOS.CHECKPOINT.REJECTED"

    def __init__(
        self, reason: str, retry_after: float | None = None, *, refused: str = "triggered"
    ) -> None:
        self.reason = reason
        self.retry_after = retry_after
        hint = f"; retry in {retry_after:.3f} s" if retry_after is not None else ""
        super().__init__(f"checkpoint not {refused}: {reason}{hint}")


class CheckpointAborted(KafkaEosError):
    """A checkpoint was aborted; its transactions are rolled back and its output never becomes
    visible. The source must rewind to the latest completed snapshot."""

    code = "KAFKA_EOS.CHECKPOINT.ABORTED"

    def __init__(self, checkpoint_id: int, reason: str, detail: str = "") -> None:
        self.checkpoint_id = checkpoint_id
        self.reason = reason
        self.detail = detail
        extra = f": {detail}" if detail else ""
        super().__init__(
            f"checkpoint {checkpoint_id} aborted ({reason}){extra}. Its transactions are rolled "
            "back; replay its input from the latest completed snapshot."
        )


class CheckpointTimeout(CheckpointAborted):
    """Not every participant acknowledged within the checkpoint timeout."""

    code = "KAFKA_EOS.CHECKPOINT.TIMEOUT"

    def __init__(self, checkpoint_id: int, timeout: float, missing: tuple[str, ...] = ()) -> None:
        self.timeout = timeout
        self.missing = missing
        detail = f"no acknowledgement within {timeout} s from {list(missing)}"
        super().__init__(checkpoint_id, "timeout", detail)


class CheckpointCommitFailed(KafkaEosError):
    """The decision is durable but some transactions did not commit.

    Not a data-loss error: the checkpoint is complete, and ``recover()`` commits the remaining
    transactions again (commit is idempotent).
    """

    code = "KAFKA_EOS.CHECKPOINT.COMMIT_FAILED"

    def __init__(
        self,
        checkpoint_id: int,
        failed: tuple[str, ...],
        first_error: str,
        errors: tuple[Exception, ...] = (),
    ) -> None:
        self.checkpoint_id = checkpoint_id
        self.failed = failed
        # Every commit's error, in order: a caller looks for the one that means data loss,
        # which need not be the first (a timeout may come before it).
        self.errors = errors
        super().__init__(
            f"checkpoint {checkpoint_id} is decided but {len(failed)} transaction(s) did not "
            f"commit: {list(failed)}; first error: {first_error}. The decision is durable: call "
            "recover() (the Spark sink does it on restart) to commit them again."
        )


class DeadlineExceeded(KafkaEosError, TimeoutError):
    """A bounded blocking call (flush, commit, abort, metadata) ran out of time."""

    code = "KAFKA_EOS.CLUSTER.DEADLINE_EXCEEDED"


class ParticipantFenced(KafkaEosError):
    """Another instance took over this participant's transactional id (a newer epoch).

    Known-fatal for this instance: it is a zombie and must stop writing; never retry.
    """

    code = "KAFKA_EOS.CHECKPOINT.PARTICIPANT_FENCED"


class ReusedCheckpointId(KafkaEosError):
    """A decided checkpoint id came back with another plan: the engine's log of it was
    deleted and planned anew. Its participants trusted the old decision and wrote nothing, so
    passing would record the new plan as done without its output (a silent loss)."""

    code = "KAFKA_EOS.CHECKPOINT.REUSED_ID"

    def __init__(self, checkpoint_id: int, decided_plan: str, plan: str, location: str) -> None:
        self.checkpoint_id = checkpoint_id
        self.decided_plan = decided_plan
        self.plan = plan
        super().__init__(
            f"checkpoint {checkpoint_id} was decided in {location} for plan {decided_plan}, "
            f"but it now runs with plan {plan}: its plan was logged anew (in Spark: "
            f"offsets/{checkpoint_id} was deleted or replaced after the sink committed batch "
            f"{checkpoint_id}). The decided output of the old plan is committed; the new plan's "
            "input was not written. Restore the original offsets/"
            f"{checkpoint_id} from a backup, or start a new query (new checkpoint location) "
            "from the offsets where the old plan ended."
        )
