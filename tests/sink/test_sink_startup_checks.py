"""The sink's startup check on the driver: read the brokers, choose and check the timeout,
and keep a pass for a while, since Spark builds the writer for every batch."""

from __future__ import annotations

from types import SimpleNamespace
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connectors.kafka.sink import startup
from connectors.policy import LintInput, LiveClusterError, SinkConfigError, check_sink_config
from connectors.policy.context import LintContext
from connectors.policy.inputs import Timing

PRODUCER = (("bootstrap.servers", "k:9092"),)


class Brokers:
    """The brokers' answers, one per read: a maximum, or an error."""

    def __init__(self, *answers: int | Exception) -> None:
        self.answers = list(answers)
        self.reads = 0

    def __call__(self, bootstrap: str, topics: list[str], options: dict[str, str]) -> object:
        self.reads += 1
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return SimpleNamespace(broker_config={"transaction.max.timeout.ms": str(answer)})


@pytest.fixture
def clock() -> mock.Mock:
    with mock.patch.dict(startup._passes, clear=True):
        clock = mock.Mock(return_value=1_000.0)
        with mock.patch.object(startup.time, "monotonic", clock):
            yield clock


def chosen(brokers: Brokers) -> int:
    with mock.patch.object(startup, "read_cluster", brokers):
        checked = dict(startup._checked_producer("k:9092", PRODUCER, Timing()))
    return int(checked["transaction.timeout.ms"])


def test_a_pass_stands_for_the_refresh_period_then_the_brokers_are_read_again(
    clock: mock.Mock,
) -> None:
    brokers = Brokers(900_000, 800_000)
    assert chosen(brokers) == 900_000
    clock.return_value += startup.CHECK_REFRESH_S - 1
    assert chosen(brokers) == 900_000 and brokers.reads == 1  # every batch, no request
    clock.return_value += 2
    assert chosen(brokers) == 800_000 and brokers.reads == 2  # a lowered maximum is seen


def test_brokers_that_cannot_be_read_again_leave_the_last_pass_standing(
    clock: mock.Mock,
) -> None:
    brokers = Brokers(900_000, LiveClusterError("cluster k:9092: timed out"), 800_000)
    assert chosen(brokers) == 900_000
    clock.return_value += startup.CHECK_REFRESH_S + 1
    assert chosen(brokers) == 900_000 and brokers.reads == 2
    # The failed read renewed the pass: the next batches do not each wait for the brokers.
    clock.return_value += startup.CHECK_REFRESH_S - 1
    assert chosen(brokers) == 900_000 and brokers.reads == 2
    clock.return_value += 2
    assert chosen(brokers) == 800_000 and brokers.reads == 3


def test_brokers_that_cannot_be_read_at_the_first_check_fail_it(clock: mock.Mock) -> None:
    with pytest.raises(LiveClusterError, match="timed out"):
        chosen(Brokers(LiveClusterError("cluster k:9092: timed out")))


# A drop-in sets no transaction timeout: librdkafka's 1 min would fail EOS002, so the sink
# chooses one from the brokers' maximum and the timing options, and checks it like a user's.
NO_TIMEOUT = {"transactional.id": "orders-v1-0"}
SLOW = Timing(max_batch_duration_ms=600_000)  # needs 2 x (10 s + 10 min + 5 min) = 30m20s


@pytest.mark.parametrize(
    ("broker", "timing", "chosen"),
    [
        ({}, Timing(), "900000"),  # Kafka's default maximum, 15 min: above the 12m20s needed
        ({"transaction.max.timeout.ms": "3600000"}, Timing(), "900000"),  # no longer stalls
        ({"transaction.max.timeout.ms": "3600000"}, SLOW, "1820000"),  # what EOS002 needs
        ({"transaction.max.timeout.ms": "2000000"}, SLOW, "1820000"),
    ],
)
def test_without_a_timeout_the_sink_chooses_one_that_passes(broker, timing, chosen):
    config = startup.producer_as_run(NO_TIMEOUT, broker, timing)
    assert config == {**NO_TIMEOUT, "transaction.timeout.ms": chosen}
    assert check_sink_config(config, broker, timing) == []


@pytest.mark.parametrize(
    ("broker", "timing"),
    [({"transaction.max.timeout.ms": "600000"}, Timing()), ({}, SLOW)],
)
def test_when_no_timeout_the_brokers_allow_passes_the_error_says_it_was_chosen(broker, timing):
    with pytest.raises(SinkConfigError) as caught:
        startup.producer_as_run(NO_TIMEOUT, broker, timing)
    [finding] = caught.value.findings
    assert finding.rule == "EOS002"
    maximum = broker.get("transaction.max.timeout.ms", "900000")
    assert f"producer transaction.timeout.ms={maximum} (" in finding.message
    assert "chosen by the kafka-eos sink from the brokers' transaction.max.timeout.ms" in (
        finding.message
    )
    assert "raise the brokers' transaction.max.timeout.ms" in finding.fix


def test_a_timeout_the_user_set_is_kept_and_checked():
    user = {**NO_TIMEOUT, "transaction.timeout.ms": "60000"}
    with pytest.raises(SinkConfigError) as caught:
        startup.producer_as_run(user, {}, Timing())
    assert "chosen by" not in str(caught.value)  # the user's own value
    kept = {**NO_TIMEOUT, "transaction.timeout.ms": 800_000}
    assert startup.producer_as_run(kept, {}, Timing()) == kept


@settings(max_examples=300, deadline=None)
@given(
    broker_max=st.one_of(
        st.none(),
        st.integers(1, 10**8).map(str),
        st.integers(1, 10**8).map(lambda ms: f"{ms}.0"),  # a number however it is spelled
    ),
    timing=st.builds(
        Timing,
        trigger_interval_ms=st.integers(0, 3_600_000),
        max_batch_duration_ms=st.integers(0, 3_600_000),
        max_restart_time_ms=st.integers(0, 3_600_000),
    ),
)
def test_the_sink_runs_with_the_timeout_the_rules_judged(broker_max, timing):
    """The sink chooses its timeout itself (connectors.transaction_timeout) and the rules see
    it chosen in the linter's view of the sink: both must name the same value, or a passed
    check would not be about the timeout the tasks run with."""
    broker = {} if broker_max is None else {"transaction.max.timeout.ms": broker_max}
    view = LintContext.from_input(
        LintInput(producer=NO_TIMEOUT, broker=broker, timing=timing, kafka_eos_sink=True)
    ).producer
    assert view is not None
    judged = view.get("transaction.timeout.ms").value
    try:
        run = startup.producer_as_run(NO_TIMEOUT, broker, timing)
    except SinkConfigError as caught:
        # The rules refused the chosen timeout, and say so with its value.
        assert f"transaction.timeout.ms={judged} (" in str(caught)
        assert "chosen by the kafka-eos sink" in str(caught)
    else:
        assert run["transaction.timeout.ms"] == judged
