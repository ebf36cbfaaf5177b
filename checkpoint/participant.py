"""The two-phase-commit participant: what a transactional sink implements.

Two roles, because in Spark they run in different processes:

* the **writer** half (``begin_transaction``, ``pre_commit``) runs in a task on an executor,
  once per task and checkpoint (micro-batch);
* the **committer** half (``commit``, ``commit_all``, ``verify``, ``abort``,
  ``abort_lingering``) runs on the driver, in
  ``DataSourceStreamWriter.commit/abort`` and at query start, on committables the tasks
  returned. It must work on a fresh instance built from configuration alone: the producer that
  wrote a transaction is gone by then (other process, or a crash).

What crosses processes must be picklable: the participant itself (Spark pickles the writer to
the executors) and the :class:`~checkpoint.model.Committable` (returned inside the task's commit
message). Keep both small: configuration in, no open clients; open clients lazily in the task.

Every method bounds its own blocking calls with a :class:`~checkpoint.deadline.Deadline`.

The examples use the in-memory reference implementation from :mod:`checkpoint.testing`.

>>> from checkpoint.testing import InMemoryBroker, InMemoryParticipant
>>> broker = InMemoryBroker()
>>> task = InMemoryParticipant(broker, "app-sink-0")
>>> task.begin_transaction(7)
>>> task.write(7, "hello")
>>> committable = task.pre_commit(7)
>>> broker.visible  # pre-committed, but nothing visible yet
[]
>>> driver = InMemoryParticipant(broker, "app-sink")  # a fresh instance, elsewhere
>>> driver.commit(committable)
>>> driver.commit(committable)  # idempotent: the second call is a no-op
>>> broker.visible
['hello']
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from checkpoint.model import CheckpointId, Committable


@runtime_checkable
class Committer(Protocol):
    """The driver-side half; the only part the reference coordinator
    (:class:`~checkpoint.reference_coordinator.Coordinator`) calls.

    Each method is idempotent and tolerant, because recovery repeats whatever may or may not
    have happened before a crash.
    """

    def commit(self, committable: Committable) -> None:
        """Make the pre-committed transaction visible (notify-complete). Runs on the driver.

        Called only after the decision naming ``committable`` is durable. Committing an already
        committed transaction is a no-op. Raise on a transaction that was aborted or is unknown:
        that is data loss and must not pass silently.

        >>> from checkpoint.testing import InMemoryBroker, InMemoryParticipant
        >>> broker = InMemoryBroker()
        >>> task = InMemoryParticipant(broker, "sink-0")
        >>> task.begin_transaction(1); task.write(1, "a")
        >>> InMemoryParticipant(broker, "sink").commit(task.pre_commit(1))
        >>> broker.visible
        ['a']
        """
        ...

    def abort(self, committable: Committable) -> None:
        """Roll the transaction back. Runs on the driver (abort notification).

        Tolerates a transaction that already ended: aborting an aborted one is a no-op, and so
        is aborting a committed one (it stays committed; the coordinator never asks this for a
        decided checkpoint).

        >>> from checkpoint.testing import InMemoryBroker, InMemoryParticipant
        >>> broker = InMemoryBroker()
        >>> task = InMemoryParticipant(broker, "sink-0")
        >>> task.begin_transaction(1); task.write(1, "a")
        >>> committable = task.pre_commit(1)
        >>> InMemoryParticipant(broker, "sink").abort(committable)
        >>> InMemoryParticipant(broker, "sink").abort(committable)  # tolerated
        >>> broker.visible
        []
        """
        ...

    def commit_all(self, committables: Sequence[Committable]) -> Sequence[tuple[str, Exception]]:
        """Step 4 for a whole decision: :meth:`commit` each, under one deadline, concurrently
        where the system allows; one failure never stops the others. Returns the failures as
        (transactional id, error), in the order of ``committables``.

        >>> from checkpoint.testing import InMemoryBroker, InMemoryParticipant
        >>> broker = InMemoryBroker()
        >>> tasks = [InMemoryParticipant(broker, f"sink-{n}") for n in range(2)]
        >>> for n, task in enumerate(tasks):
        ...     task.begin_transaction(1); task.write(1, n)
        >>> InMemoryParticipant(broker, "sink").commit_all([t.pre_commit(1) for t in tasks])
        []
        >>> broker.visible
        [0, 1]
        """
        ...

    def verify(self, checkpoint_id: CheckpointId, committables: Sequence[Committable]) -> None:
        """Check, just before the decision, that every committable can still be committed.

        Raise if one cannot (ended, fenced, or too close to a timeout that would end it
        before its commit): nothing is decided then, and the checkpoint is replayed.

        >>> from checkpoint.testing import InMemoryBroker, InMemoryParticipant
        >>> broker = InMemoryBroker()
        >>> task = InMemoryParticipant(broker, "sink-0")
        >>> task.begin_transaction(1); task.write(1, "a")
        >>> committable = task.pre_commit(1)
        >>> InMemoryParticipant(broker, "sink").verify(1, [committable])
        """
        ...

    def abort_lingering(self, keep: Sequence[Committable]) -> None:
        """Abort every lingering transaction in this instance's scope except ``keep``.

        Runs on the driver: before a decision, on the abort notification, and at (re)start
        after the coordinator committed the decided ones again. A lingering transaction was
        opened or pre-committed by an attempt that died, a zombie, or a run that crashed
        before its checkpoint was decided: presumed abort. Transactions that another pipeline
        owns are outside the scope, and are never aborted.

        >>> from checkpoint.testing import InMemoryBroker, InMemoryParticipant
        >>> broker = InMemoryBroker()
        >>> task = InMemoryParticipant(broker, "sink-0")
        >>> task.begin_transaction(4); task.write(4, "never decided")
        >>> InMemoryParticipant(broker, "sink").abort_lingering(keep=[])
        >>> [t.state.value for t in broker.transactions()]
        ['aborted']
        """
        ...


def commit_each(
    commit: Callable[[Committable], None], committables: Sequence[Committable]
) -> list[tuple[str, Exception]]:
    """:meth:`Committer.commit_all` for a committer that commits one at a time."""
    failures: list[tuple[str, Exception]] = []
    for committable in committables:
        try:
            commit(committable)
        except Exception as exc:
            failures.append((committable.transactional_id, exc))
    return failures


@runtime_checkable
class Participant(Committer, Protocol):
    """A full participant: the task-side writer half plus the :class:`Committer` half."""

    def begin_transaction(self, checkpoint_id: CheckpointId) -> None:
        """Open the transaction that collects this task's output for ``checkpoint_id``.

        Runs in the task (executor), before the first record. Opening a transaction fences any
        older instance that used the same transactional id (e.g. a failed task attempt).

        >>> from checkpoint.testing import InMemoryBroker, InMemoryParticipant
        >>> task = InMemoryParticipant(InMemoryBroker(), "sink-0")
        >>> task.begin_transaction(3)
        """
        ...

    def pre_commit(self, checkpoint_id: CheckpointId) -> Committable:
        """The barrier reached this task: flush everything and return the committable.

        Runs in the task (executor) at the end of its input. After it returns, the transaction
        must survive the loss of this process: only commit or abort may end it. The result is
        pickled into the task's commit message.

        >>> from checkpoint.testing import InMemoryBroker, InMemoryParticipant
        >>> task = InMemoryParticipant(InMemoryBroker(), "sink-0")
        >>> task.begin_transaction(3); task.write(3, "x", partition=("out", 1))
        >>> committable = task.pre_commit(3)
        >>> committable.transactional_id, committable.record_count, committable.partitions
        ('sink-0-3', 1, (('out', 1),))
        """
        ...
