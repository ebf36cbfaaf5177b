"""``confirmed_absent``: the one check that turns "unknown topic or partition" into a deletion,
on the driver and in tasks. One answer, or one broker, saying "unknown" must not be enough;
the same answer for a couple of seconds, from two brokers where there are several, is. No
broker: scripted metadata answers and a manual clock."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from confluent_kafka import KafkaError, KafkaException
from kafka_metadata import UNKNOWN, FakeMetadata, FakeTopic

from checkpoint.testing import ManualClock
from connectors.kafka.source import client as source_client
from connectors.kafka.source.client import confirmed_absent
from connectors.kafka.source.offsets import PartitionKey

Topics = dict[str, FakeTopic]


@pytest.fixture(autouse=True)
def _fresh_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """What earlier checks saw is remembered per process: each test starts afresh."""
    monkeypatch.setattr(source_client, "_absent_since", {})


PRESENT: Topics = {"t": FakeTopic([0, 1])}
GONE: Topics = {}


class ScriptedClient:
    """Answers ``list_topics`` from ``script(call)`` (topics, or an exception to raise), as
    broker ``broker`` of a cluster of ``brokers``; a lookup by name of a topic the answer lacks
    gets UNKNOWN_TOPIC_OR_PART, as from Kafka."""

    def __init__(
        self,
        script: Callable[[int], Topics | Exception],
        broker: int = 1,
        brokers: tuple[int, ...] = (1,),
    ) -> None:
        self.script, self.broker, self.brokers = script, broker, brokers
        self.calls: list[str | None] = []
        self.closed = False

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> FakeMetadata:
        answer = self.script(len(self.calls))
        self.calls.append(topic)
        if isinstance(answer, Exception):
            raise answer
        if topic is not None:
            answer = {topic: answer.get(topic, FakeTopic([], UNKNOWN))}
        return FakeMetadata(answer, answered_by=self.broker, brokers=self.brokers)

    def close(self) -> None:
        self.closed = True


def always(topics: Topics | Exception) -> Callable[[int], Topics | Exception]:
    return lambda call: topics


def check(
    client: ScriptedClient,
    keys: list[PartitionKey],
    connect: Callable[[], ScriptedClient] | None = None,
    clock: ManualClock | None = None,
) -> set[PartitionKey]:
    clock = clock or ManualClock()
    return confirmed_absent(client, keys, connect, clock=clock, sleep=clock.advance)  # type: ignore[arg-type]


def test_a_deletion_is_confirmed_by_unknown_answers_for_two_seconds() -> None:
    clock = ManualClock()
    client = ScriptedClient(always(GONE))
    assert check(client, [("t", 0)], clock=clock) == {("t", 0)}
    assert clock.now >= source_client._GONE_CONFIRM_S
    # Every round asks by name and lists all topics: two different requests agree.
    assert client.calls[:2] == ["t", None]
    assert len(client.calls) >= 2 * source_client._GONE_ANSWERS


def test_a_short_window_still_takes_several_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(source_client, "_GONE_CONFIRM_S", 0.0)
    client = ScriptedClient(always(GONE))
    assert check(client, [("t", 0)]) == {("t", 0)}
    assert len(client.calls) == 2 * source_client._GONE_ANSWERS


@pytest.mark.parametrize("truth_at", [0, 1, 2, 5, 8])
def test_one_answer_showing_the_partition_clears_it(truth_at: int) -> None:
    """Unknown in every answer but one, wherever that one falls in the window."""
    client = ScriptedClient(lambda call: PRESENT if call == truth_at else GONE)
    assert check(client, [("t", 0)]) == set()
    assert len(client.calls) == truth_at + 1  # no need to ask on


@pytest.mark.parametrize("lie", [0, 1])
def test_one_lying_answer_is_no_deletion(lie: int) -> None:
    """A broker that has not learnt of the topic yet: the lookup by name (0) or the listing
    (1) leaves it out once; the next answer shows it."""
    clock = ManualClock()
    client = ScriptedClient(lambda call: GONE if call == lie else PRESENT)
    assert check(client, [("t", 0)], clock=clock) == set()
    assert clock.now == 0.0


@pytest.mark.parametrize(
    "error", [KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.LEADER_NOT_AVAILABLE]
)
def test_another_error_for_the_topic_is_no_deletion(error: int) -> None:
    """A listing leaves out a topic the client may not describe (a brief ACL change); asked
    by name, the broker says so instead of "unknown"."""

    def script(call: int) -> Topics:
        return GONE if call % 2 else {"t": FakeTopic([], error)}

    assert check(ScriptedClient(script), [("t", 0)]) == set()


def test_a_partition_the_topic_no_longer_has_is_confirmed() -> None:
    """Recreated with fewer partitions: the topic is there, partition 3 is not."""
    client = ScriptedClient(always({"t": FakeTopic([0, 1])}))
    assert check(client, [("t", 1), ("t", 3)]) == {("t", 3)}


def test_a_failed_request_confirms_nothing() -> None:
    """An unreachable broker proves nothing; the caller asks again later."""
    transport = KafkaException(KafkaError(KafkaError._TRANSPORT))
    client = ScriptedClient(lambda call: transport if call == 3 else GONE)
    assert check(client, [("t", 0)]) == set()


def test_all_keys_share_one_window() -> None:
    clock = ManualClock()
    keys = [("a", 0), ("a", 1), ("b", 0), ("c", 4)]
    client = ScriptedClient(always({"d": FakeTopic([0])}))
    assert check(client, keys, clock=clock) == set(keys)
    assert clock.now < 2 * source_client._GONE_CONFIRM_S
    assert client.calls[:4] == ["a", "b", "c", None]


def test_only_the_keys_shown_are_cleared() -> None:
    client = ScriptedClient(always({"a": FakeTopic([0])}))
    assert check(client, [("a", 0), ("b", 0)]) == {("b", 0)}


class TestSeveralBrokers:
    """librdkafka sends one client's metadata requests to one broker: a broker that lags (or
    has just restarted) could say "unknown" for the whole window. A second broker must agree;
    fresh clients are asked until one answers."""

    BROKERS = (1, 2, 3)

    def fresh(self, *answers: tuple[int, Topics | Exception]) -> Callable[[], ScriptedClient]:
        self.opened: list[ScriptedClient] = []
        queue = list(answers)

        def connect() -> ScriptedClient:
            broker, topics = queue.pop(0) if len(queue) > 1 else queue[0]
            client = ScriptedClient(always(topics), broker, self.BROKERS)
            self.opened.append(client)
            return client

        return connect

    def test_confirmed_once_a_second_broker_agrees(self) -> None:
        main = ScriptedClient(always(GONE), 1, self.BROKERS)
        connect = self.fresh((1, GONE), (2, GONE))
        assert check(main, [("t", 0)], connect) == {("t", 0)}
        assert len(self.opened) == 2
        assert all(client.closed for client in self.opened)

    def test_not_confirmed_while_one_broker_alone_says_unknown(self) -> None:
        main = ScriptedClient(always(GONE), 1, self.BROKERS)
        connect = self.fresh((1, GONE))
        assert check(main, [("t", 0)], connect) == set()
        assert len(self.opened) == source_client._GONE_CLIENTS_PER_BROKER * len(self.BROKERS)
        assert check(main, [("t", 0)], None) == set()

    def test_a_second_broker_that_knows_the_topic_clears_it(self) -> None:
        main = ScriptedClient(always(GONE), 1, self.BROKERS)
        assert check(main, [("t", 0)], self.fresh((2, PRESENT))) == set()

    def test_a_fresh_client_without_an_answer_is_skipped(self) -> None:
        main = ScriptedClient(always(GONE), 1, self.BROKERS)
        down = KafkaException(KafkaError(KafkaError._TRANSPORT))
        connect = self.fresh((2, down), (3, GONE))
        assert check(main, [("t", 0)], connect) == {("t", 0)}

    def test_an_answer_over_a_bootstrap_connection_is_known_by_its_address(self) -> None:
        class Bootstrap(ScriptedClient):
            def list_topics(self, topic: str | None = None, timeout: float = -1) -> FakeMetadata:
                answer = super().list_topics(topic, timeout)
                answer.orig_broker_id, answer.orig_broker_name = -1, "k:9093/bootstrap"
                return answer

        main = ScriptedClient(always(GONE), 1, self.BROKERS)
        self.opened = []
        bootstrap = Bootstrap(always(GONE), 2, self.BROKERS)
        assert check(main, [("t", 0)], lambda: bootstrap) == {("t", 0)}  # k:9093 is broker 2

    def test_an_address_with_its_protocol_is_known_too(self) -> None:
        """With TLS or SASL librdkafka names a bootstrap connection "sasl_ssl://host:port/
        bootstrap"; its broker must still be recognised."""

        class Secured(ScriptedClient):
            def list_topics(self, topic: str | None = None, timeout: float = -1) -> FakeMetadata:
                answer = super().list_topics(topic, timeout)
                answer.orig_broker_id = -1
                answer.orig_broker_name = "sasl_ssl://k:9093/bootstrap"
                return answer

        main = ScriptedClient(always(GONE), 1, self.BROKERS)
        secured = Secured(always(GONE), 2, self.BROKERS)
        assert check(main, [("t", 0)], lambda: secured) == {("t", 0)}  # k:9093 is broker 2

    def test_one_broker_alone_confirms_after_saying_so_at_every_check_for_long(self) -> None:
        """A bootstrap behind a load balancer names no broker: a deletion must not hang the
        query forever, so one broker's answers confirm once they held long enough."""
        clock = ManualClock()
        main = ScriptedClient(always(GONE), 1, self.BROKERS)
        connect = self.fresh((1, GONE))
        assert check(main, [("t", 0)], connect, clock) == set()
        clock.advance(source_client._GONE_ONE_BROKER_S / 2)
        assert check(main, [("t", 0)], connect, clock) == set()
        clock.advance(source_client._GONE_ONE_BROKER_S / 2)
        assert check(main, [("t", 0)], connect, clock) == {("t", 0)}

    def test_one_answer_showing_the_partition_restarts_the_long_wait(self) -> None:
        clock = ManualClock()
        main = ScriptedClient(always(GONE), 1, self.BROKERS)
        connect = self.fresh((1, GONE))
        assert check(main, [("t", 0)], connect, clock) == set()
        clock.advance(source_client._GONE_ONE_BROKER_S)
        back = ScriptedClient(always(PRESENT), 1, self.BROKERS)
        assert check(back, [("t", 0)], connect, clock) == set()  # there after all
        clock.advance(1)
        assert check(main, [("t", 0)], connect, clock) == set()  # the wait starts again
