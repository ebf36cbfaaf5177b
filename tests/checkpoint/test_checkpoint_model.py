"""Value objects: validation, pickling, and one round trip per persisted format."""

from __future__ import annotations

import json
import pickle

import pytest

from checkpoint.errors import FormatError, UnsupportedFormatVersion
from checkpoint.model import (
    AcceptedLoss,
    Committable,
    Confirmation,
    Snapshot,
    SourceOffset,
    as_checkpoint_id,
)

COMMITTABLE = Committable(
    "app-sink-3-7", 4001, 2, 120, (("out", 1), ("out", 0), ("out", 1)), 1_700_000_000_100
)
SNAPSHOT = Snapshot(
    checkpoint_id=7,
    pipeline_id="orders-to-invoices",
    committables=(COMMITTABLE, Committable("app-sink-4-7", 4002, 0, 0)),
    source_offsets=(SourceOffset("orders", 1, 900), SourceOffset("orders", 0, 812)),
    triggered_at_ms=1_700_000_000_000,
    decided_at_ms=1_700_000_000_250,
    plan="sha256:5e1f",
)
CONFIRMED_LOSS = Confirmation(
    as_checkpoint_id(7),
    1_700_000_000_300,
    AcceptedLoss((COMMITTABLE,), "INC-42: input replayed by hand", "ops@host-1"),
)


def test_committable_round_trips_through_json() -> None:
    data = json.loads(json.dumps(COMMITTABLE.to_dict()))
    assert (data["version"], data["start_time_ms"]) == (2, 1_700_000_000_100)
    assert Committable.from_dict(data) == COMMITTABLE


def test_a_version_1_committable_reads_with_no_start_time() -> None:
    """Decisions written before start times were recorded stay readable: -1, unknown."""
    data = {k: v for k, v in COMMITTABLE.to_dict().items() if k != "start_time_ms"}
    data["version"] = 1
    old = Committable.from_dict(data)
    assert (old.key, old.start_time_ms) == (COMMITTABLE.key, -1)


def test_snapshot_round_trips_through_json() -> None:
    data = json.loads(json.dumps(SNAPSHOT.to_dict()))
    assert (data["version"], data["kind"], data["plan"]) == (2, "snapshot", "sha256:5e1f")
    assert Snapshot.from_dict(data) == SNAPSHOT


def test_a_version_1_snapshot_reads_with_no_plan() -> None:
    """Decisions written before plans were recorded stay readable: no plan to compare."""
    data = {k: v for k, v in SNAPSHOT.to_dict().items() if k != "plan"}
    data["version"] = 1
    old = Snapshot.from_dict(data)
    assert old.plan is None
    assert old.committables == SNAPSHOT.committables


def test_confirmation_round_trips_through_json() -> None:
    confirmation = Confirmation(as_checkpoint_id(7), 1_700_000_000_300)
    data = json.loads(json.dumps(confirmation.to_dict()))
    assert (data["version"], data["kind"], data["accepted_loss"]) == (3, "confirmation", None)
    assert Confirmation.from_dict(data) == confirmation


def test_a_confirmation_with_an_accepted_loss_round_trips_through_json() -> None:
    data = json.loads(json.dumps(CONFIRMED_LOSS.to_dict()))
    assert data["version"] == 3
    assert data["accepted_loss"]["reason"] == "INC-42: input replayed by hand"
    assert data["accepted_loss"]["lost"] == [COMMITTABLE.to_dict()]
    assert Confirmation.from_dict(data) == CONFIRMED_LOSS


def test_an_accepted_loss_of_undetermined_transactions_only_round_trips_through_json() -> None:
    """A transaction whose fate the broker no longer shows is accepted as undetermined, never
    as lost: its records may be visible."""
    undetermined = Confirmation(
        as_checkpoint_id(7),
        1_700_000_000_300,
        AcceptedLoss((), "INC-43: verified", "ops@host-1", undetermined=(COMMITTABLE,)),
    )
    data = json.loads(json.dumps(undetermined.to_dict()))
    assert (data["accepted_loss"]["lost"], len(data["accepted_loss"]["undetermined"])) == ([], 1)
    assert Confirmation.from_dict(data) == undetermined


def test_a_version_2_confirmation_reads_with_no_undetermined_transactions() -> None:
    data = CONFIRMED_LOSS.to_dict()
    data["version"] = 2
    del data["accepted_loss"]["undetermined"]
    assert Confirmation.from_dict(data) == CONFIRMED_LOSS


def test_a_version_1_confirmation_reads_with_no_accepted_loss() -> None:
    """Confirmations written before losses could be accepted stay readable."""
    data = {"version": 1, "kind": "confirmation", "checkpoint_id": 7, "confirmed_at_ms": 5}
    assert Confirmation.from_dict(data) == Confirmation(as_checkpoint_id(7), 5, None)


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"lost": ()}, "one Committable or more"),
        ({"lost": (("app-sink-3-7", 4001, 2),)}, "must be Committables"),
        ({"undetermined": [None]}, "must be Committables"),
        ({"reason": "  "}, "reason of an accepted loss"),
        ({"accepted_by": None}, "accepted_by of an accepted loss"),
    ],
)
def test_invalid_accepted_losses_are_rejected(fields: dict[str, object], match: str) -> None:
    base = {"lost": (COMMITTABLE,), "reason": "why", "accepted_by": "ops@host"}
    with pytest.raises(FormatError, match=match):
        AcceptedLoss(**{**base, **fields})  # type: ignore[arg-type]


def test_an_accepted_loss_needs_its_time() -> None:
    with pytest.raises(FormatError, match="needs its confirmed_at_ms"):
        Confirmation(as_checkpoint_id(7), None, CONFIRMED_LOSS.accepted_loss)


@pytest.mark.parametrize(
    "value", [COMMITTABLE, SNAPSHOT, Confirmation(as_checkpoint_id(1)), CONFIRMED_LOSS]
)
def test_value_objects_pickle(value: object) -> None:
    assert pickle.loads(pickle.dumps(value)) == value


def test_committable_normalizes_partitions_and_names_its_transaction() -> None:
    assert COMMITTABLE.partitions == (("out", 0), ("out", 1))
    assert COMMITTABLE.key == ("app-sink-3-7", 4001, 2)


def test_snapshot_sorts_offsets_and_maps_them() -> None:
    assert SNAPSHOT.offsets() == {("orders", 0): 812, ("orders", 1): 900}
    assert Snapshot.offsets_from({("t", 0): 5}) == (SourceOffset("t", 0, 5),)


@pytest.mark.parametrize(
    ("kind", "cls", "data"),
    [
        ("committable", Committable, {**COMMITTABLE.to_dict(), "version": 3}),
        ("snapshot", Snapshot, {**SNAPSHOT.to_dict(), "version": 99}),
        ("confirmation", Confirmation, {"kind": "confirmation", "checkpoint_id": 1}),
        ("confirmation", Confirmation, {**CONFIRMED_LOSS.to_dict(), "version": 4}),
        ("snapshot", Snapshot, {**SNAPSHOT.to_dict(), "version": "1"}),
    ],
)
def test_unknown_versions_are_rejected_with_the_value_seen(
    kind: str, cls: type, data: dict[str, object]
) -> None:
    with pytest.raises(UnsupportedFormatVersion) as raised:
        cls.from_dict(data)
    assert raised.value.kind == kind
    supported = {"committable": (1, 2), "snapshot": (1, 2), "confirmation": (1, 2, 3)}[kind]
    assert raised.value.seen == data.get("version") and raised.value.supported == supported
    assert f"reads versions {list(supported)}" in str(raised.value)


def test_missing_field_names_the_field() -> None:
    data = COMMITTABLE.to_dict()
    del data["epoch"]
    with pytest.raises(FormatError, match='no "epoch" field'):
        Committable.from_dict(data)


def test_wrong_kind_is_rejected() -> None:
    with pytest.raises(FormatError, match="expected a snapshot"):
        Snapshot.from_dict({**Confirmation(as_checkpoint_id(1)).to_dict(), "version": 2})


@pytest.mark.parametrize(
    "fields",
    [
        {"transactional_id": ""},
        {"producer_id": -2},
        {"epoch": True},
        {"record_count": -1},
        {"partitions": (("out",),)},
    ],
)
def test_invalid_committables_are_rejected(fields: dict[str, object]) -> None:
    base = {"transactional_id": "t", "producer_id": 1, "epoch": 0, "record_count": 0}
    with pytest.raises(FormatError):
        Committable(**{**base, **fields})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fields", "refusal"),
    [
        ({"producer_id": -1, "epoch": 0}, "both -1"),
        ({"producer_id": 1, "epoch": -1}, "both -1"),
        ({"producer_id": -1, "epoch": -1, "record_count": 3}, "wrote nothing"),
        ({"producer_id": -1, "epoch": -1, "partitions": (("out", 0),)}, "wrote nothing"),
    ],
)
def test_nothing_written_is_all_or_nothing(fields: dict[str, object], refusal: str) -> None:
    base = {"transactional_id": "t", "producer_id": 1, "epoch": 0, "record_count": 0}
    with pytest.raises(FormatError, match=refusal):
        Committable(**{**base, **fields})  # type: ignore[arg-type]


def test_nothing_written_round_trips_in_the_persisted_format() -> None:
    nothing = Committable.nothing_written("app-sink-5-7")
    assert nothing.wrote_nothing and not COMMITTABLE.wrote_nothing
    assert (nothing.producer_id, nothing.epoch, nothing.record_count) == (-1, -1, 0)
    assert Committable.from_dict(json.loads(json.dumps(nothing.to_dict()))) == nothing
    # As files written before the invariant hold it: -1/-1/0, no partitions.
    old = {
        "version": 1,
        "transactional_id": "app-sink-5-7",
        "producer_id": -1,
        "epoch": -1,
        "record_count": 0,
        "partitions": [],
    }
    assert Committable.from_dict(old) == nothing


@pytest.mark.parametrize("value", [-1, True, 1.0, "3"])
def test_checkpoint_ids_are_non_negative_ints(value: object) -> None:
    with pytest.raises(FormatError, match="checkpoint id"):
        as_checkpoint_id(value)
