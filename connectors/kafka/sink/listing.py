"""The transactions of a ``transactionalIdPrefix``, as the sink names them: what the committer's
sweep of lingering transactions, ``kafka-eos txn list|abort --prefix`` and ``kafka-eos verify``
look at. Here, not in the shared transaction admin, because the ids' grammar is the sink's
(:mod:`connectors.kafka.sink.naming`)."""

from __future__ import annotations

from connectors.kafka.sink.naming import named_for_prefix
from connectors.kafka.transactions import TransactionAdmin
from connectors.kafka.txn_state import TxnDescription, TxnState


def open_transactions(
    admin: TransactionAdmin, prefix: str | None = None, *, all_states: bool = False
) -> list[TxnDescription]:
    """Transactions of every coordinator, sorted by id: Ongoing ones unless ``all_states``.

    With ``prefix``, only the ids a sink with that ``transactionalIdPrefix`` names, for any
    query (:func:`~connectors.kafka.sink.naming.named_for_prefix`), not those of a longer prefix
    such as ``<prefix>-x``.
    """
    ids = admin.list_transactional_ids(prefix or "", ongoing_only=not all_states)
    if prefix is not None:
        ids = [tid for tid in ids if named_for_prefix(prefix, tid)]
    described = admin.describe(ids).values()
    # The listing and the describe are two requests: a transaction may end in between.
    return [d for d in described if d is not None and (all_states or d.state == TxnState.ONGOING)]
