"""The in-memory reference participant behaves like Kafka transactions under read_committed."""

from __future__ import annotations

import pytest

from checkpoint.errors import ParticipantFenced, ProtocolError
from checkpoint.participant import Committer, Participant
from checkpoint.testing import InMemoryBroker, InMemoryParticipant, TransactionError


def test_it_satisfies_the_protocols(broker: InMemoryBroker) -> None:
    participant = InMemoryParticipant(broker, "sink")
    assert isinstance(participant, Participant) and isinstance(participant, Committer)


def test_records_become_visible_only_on_commit(broker: InMemoryBroker) -> None:
    task = InMemoryParticipant(broker, "sink-0")
    task.begin_transaction(1)
    task.write(1, "a")
    committable = task.pre_commit(1)
    assert broker.visible == [] and len(broker.lingering()) == 1
    task.commit(committable)
    task.commit(committable)
    assert broker.visible == ["a"] and broker.lingering() == []


def test_commit_of_an_aborted_or_open_transaction_raises(broker: InMemoryBroker) -> None:
    task = InMemoryParticipant(broker, "sink-0")
    task.begin_transaction(1)
    committable = task.pre_commit(1)
    task.abort(committable)
    task.abort(committable)
    with pytest.raises(TransactionError, match="aborted"):
        task.commit(committable)


def test_a_new_instance_fences_the_old_one(broker: InMemoryBroker) -> None:
    zombie, successor = InMemoryParticipant(broker, "sink-0"), InMemoryParticipant(broker, "sink-0")
    zombie.begin_transaction(3)
    successor.begin_transaction(3)  # e.g. the retry of a failed task attempt
    with pytest.raises(ParticipantFenced):
        zombie.write(3, "late")
    assert successor.pre_commit(3).epoch == 1


def test_recover_aborts_lingering_transactions_in_scope_except_decided(
    broker: InMemoryBroker,
) -> None:
    tasks = [InMemoryParticipant(broker, f"app-{i}") for i in range(3)]
    other = InMemoryParticipant(broker, "other-0")
    for task in [*tasks, other]:
        task.begin_transaction(1)
    decided = tasks[0].pre_commit(1)
    InMemoryParticipant(broker, "app").abort_lingering([decided])
    lingering = {t.transactional_id for t in broker.lingering()}
    assert lingering == {"app-0-1", "other-0-1"}


def test_pre_commit_without_begin_is_a_protocol_error(broker: InMemoryBroker) -> None:
    with pytest.raises(ProtocolError, match="begin_transaction"):
        InMemoryParticipant(broker, "sink-0").pre_commit(1)
