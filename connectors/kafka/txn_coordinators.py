"""Requests to the transaction coordinators of many transactional ids at once, under one deadline.

Each transactional id has one coordinator, the leader of its ``__transaction_state``
partition. :func:`call_coordinators` finds them all with one batched FindCoordinator (v4+,
Kafka 3.0+), groups the ids by coordinator, sends every coordinator its requests at once on
kafka-python's non-blocking client, and collects the answers as they arrive. An id whose
coordinator is unreachable, moved or loading is retried after its own backoff, looked up again
if the coordinator moved, and sent after the ids that never failed: it never holds back the ids
whose coordinators answer. Nothing waits on kafka-python's request timeout (30 s by default):
the client is polled in slices of the caller's deadline, and what is still unanswered when it
expires is reported as timed out. The client is driven by the calling thread only.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import kafka.errors as Errors
from kafka.future import Future
from kafka.net.compat import KafkaNetClient
from kafka.protocol.metadata import ApiVersionsRequest, CoordinatorType, FindCoordinatorRequest
from kafka.protocol.producer.transaction import EndTxnRequest
from kafka.version import __version__ as kafka_python_version

from checkpoint.deadline import Deadline, call_with_retries, retry_pause

# The coordinator is gone or moved (a broker died, the transaction log's leadership changed),
# or named a broker this client does not know yet: look the coordinator up again.
COORDINATOR_MOVED_ERRORS: tuple[type[Exception], ...] = (
    Errors.CoordinatorNotAvailableError,
    Errors.NotCoordinatorError,
    Errors.NodeNotReadyError,
    Errors.KafkaConnectionError,
    Errors.KafkaTimeoutError,
    Errors.RequestTimedOutError,
    Errors.UnknownBrokerIdError,
)
# Requests kafka-python may pipeline on one connection; the broker answers them in order, so
# more would only queue there. Set on the client, and kept to here, so neither refuses a send.
IN_FLIGHT_PER_BROKER = 5
_POLL_SLICE_S = 0.5  # the longest single wait; any answer ends it at once

# EndTxn v5 is transactions V2 (KIP-890): the coordinator bumps the epoch at every EndTxn.
# Kafka takes a request's semantics from its version alone (v5 is V2 on any cluster), and a
# 4.x broker advertises v5 at every finalized transaction.version; at level 0 (a cluster
# upgraded from 3.x that never finalized the feature) it answers a v5 UNSUPPORTED_VERSION and
# leaves the transaction wedged: Ongoing, answering CONCURRENT_TRANSACTIONS to every EndTxn,
# not aborted at its timeout, until its coordinator reloads (seen on Kafka 4.3.1). Level 1
# takes a v5, but Kafka's own producer sends v5 only from level 2, so only level 2 gets it here;
# below, v4, which keeps the epoch (V1).
EPOCH_BUMP_END_TXN_VERSION = 5
END_TXN_V5_MIN_TRANSACTION_VERSION = 2


class CoordinatorCall(Protocol):
    """One kind of request about transactional ids, sent to their coordinators."""

    retriable: tuple[type[Exception], ...]  # answers worth another try (moved ones included)
    # Failures of a sent request after which it may have been taken (a lost answer, a
    # timeout): reported as the id's answer, never sent again. Empty for a request that is
    # safe to repeat (describe, EndTxn), whose retriable failures and lookups are retried;
    # for another, every failure is the id's answer (the caller looks before it sends again).
    unsure: tuple[type[Exception], ...]
    versioned: bool  # whether requests() needs the coordinator's own API versions

    def requests(self, ids: list[str], versions: Mapping[int, int]) -> list[tuple[Any, list[str]]]:
        """Requests for ``ids``, all at one coordinator, each with the ids it covers."""
        ...

    def answers(self, response: Any, ids: list[str]) -> Mapping[str, tuple[type[Exception], Any]]:
        """Each covered id's error class (``NoError`` if none) and its part of the response."""
        ...


@dataclass(frozen=True)
class CoordinatorAnswer:
    """What one id's coordinator answered, or, ``timed_out``, the last retriable error."""

    error: type[Exception]  # kafka.errors.NoError when the coordinator answered without error
    value: Any = None
    timed_out: bool = False
    detail: str = ""  # what was seen, for the operator
    coordinator_id: int | None = None
    attempts: int = 0  # tries, each ending at a lookup, a version probe or a request


@dataclass
class _Id:
    """One transactional id's way through lookups, version probes and requests."""

    tid: str
    coordinator: int | None = None
    waiting: bool = False  # on a lookup, a probe or a request
    failures: int = 0  # retriable failures so far
    not_before: float = 0.0
    error: type[Exception] = Errors.NoError  # the last retriable error
    detail: str = ""


def group_by_coordinator(coordinators: Iterable[tuple[str, int]]) -> dict[int, list[str]]:
    """Ids per coordinator node, in the order given: each group travels on one connection."""
    groups: dict[int, list[str]] = defaultdict(list)
    for tid, node in coordinators:
        groups[node].append(tid)
    return dict(groups)


def send_order(failures: Mapping[str, int], order: Sequence[str]) -> list[str]:
    """Ids that never failed first, then by fewer failures, then as given: a broker's window of
    in-flight requests goes to the ids that can commit now, not to retries of a dead one's."""
    place = {tid: i for i, tid in enumerate(order)}
    return sorted(failures, key=lambda tid: (failures[tid], place[tid]))


def max_versions(response: Any) -> dict[int, int]:
    """API key -> the highest version that broker speaks, from its ApiVersions response."""
    error = Errors.for_code(response.error_code)
    if error is not Errors.NoError:
        raise error(f"ApiVersions answered {error.__name__}")
    return {key.api_key: key.max_version for key in response.api_keys}


def usable_versions(response: Any) -> dict[int, int]:
    """API key -> the highest version to send that broker: the highest it speaks
    (:func:`max_versions`), but EndTxn below v5 unless its finalized ``transaction.version``
    is 2 (transactions V2)."""
    versions = max_versions(response)
    if (
        EndTxnRequest.API_KEY in versions
        and transaction_version(response) < END_TXN_V5_MIN_TRANSACTION_VERSION
    ):
        versions[EndTxnRequest.API_KEY] = min(
            versions[EndTxnRequest.API_KEY], EPOCH_BUMP_END_TXN_VERSION - 1
        )
    return versions


def transaction_version(response: Any) -> int:
    """The ``transaction.version`` a broker's ApiVersions response (v3+) says is finalized; 0
    when it names none (Kafka 3.x, or a 4.x cluster upgraded without finalizing it)."""
    levels = [
        f.max_version_level
        for f in getattr(response, "finalized_features", None) or ()
        if f.name == "transaction.version"
    ]
    return max(levels, default=0)


def api_versions_request() -> ApiVersionsRequest:
    # v3+ brokers refuse an empty client software name as an invalid request.
    return ApiVersionsRequest(
        client_software_name="kafka-python", client_software_version=kafka_python_version
    )


def send(net: KafkaNetClient, node_id: int | None, request: Any) -> Future:
    """Send without blocking; a broker the client cannot reach fails the future, not the call."""
    try:
        return net.send(node_id, request)
    except Errors.KafkaError as exc:  # an unknown broker id, a cached authentication failure
        return Future().failure(exc)


def answer_of(
    net: KafkaNetClient, node_id: int, request: Any, deadline: Deadline, *, silence: str
) -> Any:
    """Broker ``node_id``'s answer to one ``request``, waited for until ``deadline``; no answer
    by then raises KafkaTimeoutError with ``silence``, what that leaves unknown."""
    future = send(net, node_id, request)
    net.poll(timeout_ms=int(deadline.remaining() * 1000), future=future)
    if not future.is_done:
        raise Errors.KafkaTimeoutError(silence)
    if future.failed():
        raise future.exception
    return future.value


def broker_max_versions(net: KafkaNetClient, node_id: int, deadline: Deadline) -> dict[int, int]:
    """API key -> highest usable version (:func:`usable_versions`), as broker ``node_id``
    itself answers ApiVersions.

    kafka-python speaks to every broker at the lower of its versions and the bootstrap
    broker's, so only the broker's own answer tells what it speaks in a mixed cluster.
    """

    def ask() -> dict[int, int]:
        silence = f"no ApiVersions answer from broker {node_id}"
        return usable_versions(
            answer_of(net, node_id, api_versions_request(), deadline, silence=silence)
        )

    return call_with_retries(
        ask,
        deadline=deadline,
        action=f"ApiVersions of broker {node_id}",
        is_retriable=lambda exc: isinstance(exc, COORDINATOR_MOVED_ERRORS),
    )


def call_coordinators(
    net: KafkaNetClient, ids: Sequence[str], call: CoordinatorCall, *, deadline: Deadline
) -> dict[str, CoordinatorAnswer]:
    """Every id's answer, or its timeout; raises on a non-retriable client-side error."""
    return _Batch(net, ids, call, deadline).run()


class _Batch:
    """One call's ids, each on its own way from lookup to answer, on one polling loop."""

    def __init__(
        self, net: KafkaNetClient, ids: Sequence[str], call: CoordinatorCall, deadline: Deadline
    ) -> None:
        self._net, self._call, self._deadline = net, call, deadline
        self._clock = time.monotonic
        self._ids = {tid: _Id(tid) for tid in ids}
        self._answers: dict[str, CoordinatorAnswer] = {}
        self._waits: list[tuple[Future, int | None, list[_Id], Callable[..., None]]] = []
        self._versions: dict[int, dict[int, int]] = {}  # this call's probes: a restarted
        self._probing: dict[int, list[_Id]] = {}  # broker may come back at another version

    def run(self) -> dict[str, CoordinatorAnswer]:
        while len(self._answers) < len(self._ids) and not self._deadline.expired():
            self._start_due()
            self._net.poll(timeout_ms=int(self._wait_s() * 1000))
            self._collect()
        return {tid: self._answers.get(tid) or self._timed_out(s) for tid, s in self._ids.items()}

    def _pending(self) -> list[_Id]:
        return [s for s in self._ids.values() if s.tid not in self._answers]

    def _start_due(self) -> None:
        now = self._clock()
        due = {s.tid: s for s in self._pending() if not s.waiting and s.not_before <= now}
        ordered = send_order({t: s.failures for t, s in due.items()}, list(self._ids))
        unknown = [due[t] for t in ordered if due[t].coordinator is None]
        if unknown:
            self._find(unknown)
        known = [(t, node) for t in ordered if (node := due[t].coordinator) is not None]
        for node, tids in group_by_coordinator(known).items():
            states = [due[t] for t in tids]
            if self._call.versioned and node not in self._versions:
                self._probe(node, states)
            else:
                self._send(node, states)

    def _wait_s(self) -> float:
        now = self._clock()
        backing_off = [s.not_before - now for s in self._pending() if s.not_before > now]
        return self._deadline.bound(min([_POLL_SLICE_S, *backing_off]))

    def _wait(
        self, node: int | None, states: list[_Id], request: Any, on: Callable[..., None]
    ) -> None:
        for s in states:
            s.waiting = True
        self._waits.append((send(self._net, node, request), node, states, on))

    def _find(self, states: list[_Id]) -> None:
        request = FindCoordinatorRequest(
            key_type=CoordinatorType.TRANSACTION,
            coordinator_keys=[s.tid for s in states],
            min_version=4,
        )
        self._wait(self._net.least_loaded_node(), states, request, self._found)

    def _probe(self, node: int, states: list[_Id]) -> None:
        """Learn the coordinator's own API versions; ids for it wait on one probe."""
        waiting = self._probing.get(node)
        if waiting is None:
            waiting = self._probing[node] = []
            self._wait(node, waiting, api_versions_request(), self._probed)
        waiting.extend(states)
        for s in states:
            s.waiting = True

    def _send(self, node: int, states: list[_Id]) -> None:
        busy = max(self._in_flight(node), self._net.in_flight_request_count(node))
        by_tid = {s.tid: s for s in states}
        requests = self._call.requests(list(by_tid), self._versions.get(node, {}))
        for request, covered in requests[: max(0, IN_FLIGHT_PER_BROKER - busy)]:
            self._wait(node, [by_tid[t] for t in covered], request, self._answered)

    def _in_flight(self, node: int) -> int:
        return sum(1 for future, at, _, _ in self._waits if at == node and not future.is_done)

    def _collect(self) -> None:
        done = [w for w in self._waits if w[0].is_done]
        self._waits = [w for w in self._waits if not w[0].is_done]
        for future, node, states, on in done:
            if node is not None and self._probing.get(node) is states:
                del self._probing[node]
            if future.succeeded():
                on(node, states, future.value)
            elif on != self._answered:
                self._failed(node, states, future.exception, lookup=True)
            elif isinstance(future.exception, self._call.unsure):
                self._unsure(node, states, future.exception)
            else:
                self._failed(node, states, future.exception, lookup=False)

    def _found(self, node: int | None, states: list[_Id], response: Any) -> None:
        by_key = {c.key: c for c in response.coordinators}
        for s in states:
            entry = by_key[s.tid]
            error = Errors.for_code(entry.error_code)
            if error is Errors.NoError:
                s.coordinator = self._net.cluster.add_coordinator(
                    entry, CoordinatorType.TRANSACTION, s.tid, synthesize_node_id=False
                )
                s.waiting = False
            elif issubclass(error, self._call.retriable):
                self._retry([s], error, f"FindCoordinator answered {error.__name__}")
            else:
                raise error(f"FindCoordinator for transactional id {s.tid}: {entry.error_message}")

    def _probed(self, node: int, states: list[_Id], response: Any) -> None:
        self._versions[node] = usable_versions(response)
        for s in states:
            s.waiting = False

    def _answered(self, node: int, states: list[_Id], response: Any) -> None:
        answers = self._call.answers(response, [s.tid for s in states])
        for s in states:
            error, value = answers[s.tid]
            if issubclass(error, self._call.retriable):
                # Probe again before the retry: the transactions version may have been
                # downgraded meanwhile, and a v5 at level 0 would wedge the transaction.
                self._versions.pop(node, None)
                self._retry([s], error, f"coordinator {node} answered {error.__name__}")
            else:
                self._answers[s.tid] = CoordinatorAnswer(
                    error, value, coordinator_id=node, attempts=s.failures + 1
                )

    def _unsure(self, node: int | None, states: list[_Id], exc: Exception) -> None:
        """The request went out and no answer came: it may have been taken, so it is the
        id's answer (the caller looks before it sends again)."""
        for s in states:
            self._answers[s.tid] = CoordinatorAnswer(
                type(exc), detail=f"{exc!r} from broker {node}", coordinator_id=node,
                attempts=s.failures + 1,
            )  # fmt: skip

    def _failed(self, node: int | None, states: list[_Id], exc: Exception, *, lookup: bool) -> None:
        """A failed request: a lookup or probe changed nothing, so a broken connection or a
        timeout never fails the call (:meth:`_retry`); the call's own requests go by its
        rules."""
        retriable = self._call.retriable
        if lookup:
            retriable = (*retriable, *COORDINATOR_MOVED_ERRORS)
        if not isinstance(exc, retriable):
            raise exc
        if isinstance(exc, COORDINATOR_MOVED_ERRORS) and node is not None:
            self._versions.pop(node, None)
        self._retry(states, type(exc), f"{exc!r} from broker {node}")

    def _retry(self, states: list[_Id], error: type[Exception], detail: str) -> None:
        """Another try after a backoff; for a call with unsure failures (a fence), the
        failure is the id's answer instead: its request goes out only right after the caller
        looked (an InitProducerId aborts whatever transaction the id holds when it arrives),
        so the caller looks again before it sends again."""
        if self._call.unsure:
            for s in states:
                self._answers[s.tid] = CoordinatorAnswer(
                    error, detail=detail, coordinator_id=s.coordinator, attempts=s.failures + 1
                )
            return
        now = self._clock()
        for s in states:
            s.failures += 1
            s.error, s.detail, s.waiting = error, detail, False
            s.not_before = now + retry_pause(s.failures)
            if issubclass(error, COORDINATOR_MOVED_ERRORS):
                s.coordinator = None

    def _timed_out(self, s: _Id) -> CoordinatorAnswer:
        where = "its coordinator" if s.coordinator is None else f"coordinator {s.coordinator}"
        if s.waiting:
            detail = f"no answer from {where} within {self._deadline.timeout} s"
            detail += f" (before: {s.detail})" if s.detail else ""
        else:
            detail = s.detail or f"nothing sent within {self._deadline.timeout} s"
        error = s.error if s.error is not Errors.NoError else Errors.KafkaTimeoutError
        attempts = s.failures + int(s.waiting)
        return CoordinatorAnswer(
            error, timed_out=True, detail=detail, coordinator_id=s.coordinator, attempts=attempts
        )
