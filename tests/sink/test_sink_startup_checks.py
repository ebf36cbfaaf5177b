"""The sink's startup check on the driver: read the brokers, choose and check the timeout,
and keep a pass for a while, since Spark builds the writer for every batch."""

from __future__ import annotations

from types import SimpleNamespace
from unittest import mock

import pytest

from connectors.policy import LiveClusterError
from connectors.policy.inputs import Timing
from connectors.spark import sink as spark_sink

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
    with mock.patch.dict(spark_sink._passed, clear=True):
        clock = mock.Mock(return_value=1_000.0)
        with mock.patch.object(spark_sink.time, "monotonic", clock):
            yield clock


def chosen(brokers: Brokers) -> int:
    with mock.patch.object(spark_sink, "read_cluster", brokers):
        checked = dict(spark_sink._checked("k:9092", PRODUCER, Timing()))
    return int(checked["transaction.timeout.ms"])


def test_a_pass_stands_for_the_refresh_period_then_the_brokers_are_read_again(
    clock: mock.Mock,
) -> None:
    brokers = Brokers(900_000, 800_000)
    assert chosen(brokers) == 900_000
    clock.return_value += spark_sink._CHECK_REFRESH_S - 1
    assert chosen(brokers) == 900_000 and brokers.reads == 1  # every batch, no request
    clock.return_value += 2
    assert chosen(brokers) == 800_000 and brokers.reads == 2  # a lowered maximum is seen


def test_brokers_that_cannot_be_read_again_leave_the_last_pass_standing(
    clock: mock.Mock,
) -> None:
    brokers = Brokers(900_000, LiveClusterError("cluster k:9092: timed out"), 800_000)
    assert chosen(brokers) == 900_000
    clock.return_value += spark_sink._CHECK_REFRESH_S + 1
    assert chosen(brokers) == 900_000 and brokers.reads == 2
    # The failed read renewed the pass: the next batches do not each wait for the brokers.
    clock.return_value += spark_sink._CHECK_REFRESH_S - 1
    assert chosen(brokers) == 900_000 and brokers.reads == 2
    clock.return_value += 2
    assert chosen(brokers) == 800_000 and brokers.reads == 3


def test_brokers_that_cannot_be_read_at_the_first_check_fail_it(clock: mock.Mock) -> None:
    with pytest.raises(LiveClusterError, match="timed out"):
        chosen(Brokers(LiveClusterError("cluster k:9092: timed out")))
