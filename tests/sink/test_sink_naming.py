"""Transactional-id naming: bounded, one id per concurrent attempt, recognisable by owner.

Recovery aborts every open transaction this query owns, so owning too much would abort another
query's transactions (a longer prefix, or the same prefix on another checkpoint location), and
owning too little would leave lingering ones.
"""

from __future__ import annotations

import pickle

import pytest

from connectors.kafka.sink.naming import (
    NO_OWNER,
    SLOTS_PER_TASK,
    OwnedId,
    TransactionalIdNaming,
    derived_prefix,
    named_for_prefix,
    owner_of,
)

OURS = TransactionalIdNaming("orders", "0123abcd")


def test_id_is_prefix_owner_task_partition_slot() -> None:
    assert OURS.transactional_id(17, 3) == "orders-0123abcd-17-3"
    with pytest.raises(ValueError, match="slot"):
        OURS.transactional_id(0, SLOTS_PER_TASK)


def test_the_owner_is_the_start_of_the_sha256_of_the_query_id() -> None:
    query_id = "da5d7a29-cdca-4238-9236-4b1a56727dae"
    assert owner_of(query_id) == owner_of(query_id)
    assert owner_of(query_id) != owner_of("0a5d7a29-cdca-4238-9236-4b1a56727dae")
    assert len(owner_of(query_id)) == 8


@pytest.mark.parametrize(("attempt", "task_attempt_id"), [(0, 0), (1, 0), (7, 3), (8, 40), (9, 5)])
def test_an_attempt_tries_every_slot_of_its_task_once_its_own_first(
    attempt: int, task_attempt_id: int
) -> None:
    slots = OURS.slots(5, attempt, task_attempt_id)
    assert slots[0] == OURS.transactional_id(5, (attempt + task_attempt_id) % SLOTS_PER_TASK)
    assert sorted(slots) == sorted(OURS.transactional_id(5, s) for s in range(SLOTS_PER_TASK))


def test_a_zombie_of_a_resubmitted_stage_starts_apart_from_the_new_attempt() -> None:
    """After a FetchFailed, the old stage attempt's task and the new one's are both attempt 0:
    their task attempt ids (unique per attempt) start them on different ids, so neither's
    init_transactions can abort the other's transaction, which may be decided."""
    zombie, new = OURS.slots(0, 0, 17), OURS.slots(0, 0, 42)
    assert zombie[0] != new[0]


def test_the_starting_slots_of_attempts_spread_over_every_slot() -> None:
    """Two attempts meet at their first slot with a chance of one in SLOTS_PER_TASK."""
    starts = [OURS.slots(0, attempt, tid)[0] for attempt in range(4) for tid in range(64)]
    counts = {slot: starts.count(slot) for slot in set(starts)}
    assert len(counts) == SLOTS_PER_TASK and len(set(counts.values())) == 1


def test_the_query_owns_its_ids_only() -> None:
    assert OURS.owns(OURS.transactional_id(3, 1))
    assert OURS.foreign_owner(OURS.transactional_id(3, 1)) is None


def test_an_id_of_a_release_before_owners_is_never_owned_but_reported() -> None:
    """``<prefix>-<task partition>`` may be another query's, still on the old release: never
    abort it as this query's own (it may be decided), report it as a conflict instead."""
    assert not OURS.owns("orders-3")
    assert OURS.foreign_owner("orders-3") == NO_OWNER
    assert named_for_prefix("orders", "orders-3")


def test_another_location_with_the_same_prefix_is_foreign_never_owned() -> None:
    theirs = TransactionalIdNaming("orders", "ffff0000").transactional_id(0, 0)
    assert not OURS.owns(theirs)
    assert OURS.foreign_owner(theirs) == "ffff0000"
    assert named_for_prefix("orders", theirs)


@pytest.mark.parametrize(
    "candidate",
    [
        "orders-x-1",  # the ids of a query whose prefix is 'orders-x'
        "orders-x-0123abcd-1-0",
        "orders-0123abcd-1-32",  # beyond the slots
        "orders-0123ABCD-1-0",
        "orders-0123abcd-1",
        "orders-",
        "orders",
        "orders-1a",
        "orders1",
        "other-orders-1",
        "orders-1\n",
    ],
)
def test_ids_of_other_prefixes_are_neither_owned_nor_foreign(candidate: str) -> None:
    assert not OURS.owns(candidate)
    assert OURS.foreign_owner(candidate) is None
    assert not named_for_prefix("orders", candidate)


@pytest.mark.parametrize(
    ("prefix", "foreign"),
    [
        ("a.b", "aXb-1"),  # '.' must not match any character
        ("a+", "aa-1"),
        ("a*", "-1"),
        ("a|b", "b-1"),
        ("(a)", "a-1"),
        ("a[0-9]", "a5-1"),
    ],
)
def test_regex_metacharacters_in_the_prefix_are_literal(prefix: str, foreign: str) -> None:
    naming = TransactionalIdNaming(prefix, "0123abcd")
    assert naming.owns(naming.transactional_id(3, 0))
    assert not naming.owns(foreign) and not named_for_prefix(prefix, foreign)


def test_naming_travels_to_the_tasks() -> None:
    assert pickle.loads(pickle.dumps(OURS)) == OURS


def test_an_owner_is_eight_hex_digits() -> None:
    with pytest.raises(ValueError, match="8 lower-case hex"):
        TransactionalIdNaming("orders", "not-hex!")


@pytest.mark.parametrize(
    "spelling",
    ["/chk/orders", "/chk/orders/", "/chk//orders", "/chk/x/../orders", "file:/chk/orders",
     "file:///chk/orders/"],
)  # fmt: skip
def test_a_derived_prefix_is_the_same_however_the_location_is_spelled(spelling: str) -> None:
    assert derived_prefix(spelling) == derived_prefix("/chk/orders")


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("s3a://bucket/chk/q", "s3://bucket/chk/q/"),  # Hadoop's S3 connector names the same
        ("hdfs://NameNode:8020/chk/q", "hdfs://namenode:8020/chk/q"),
        ("hdfs:///chk/q", "hdfs:/chk/q"),  # the default filesystem
    ],
)
def test_a_derived_prefix_follows_hadoops_names_for_one_place(one: str, other: str) -> None:
    assert derived_prefix(one) == derived_prefix(other)


@pytest.mark.parametrize(
    "other",
    ["/chk/orders2", "/other/orders", "hdfs:/chk/orders", "hdfs://nn:8020/chk/orders",
     "s3://chk/orders"],
)  # fmt: skip
def test_two_places_derive_two_prefixes(other: str) -> None:
    assert derived_prefix(other) != derived_prefix("/chk/orders")


def test_buckets_that_differ_in_case_derive_two_prefixes() -> None:
    """S3's legacy buckets can differ in case only: one prefix for both would make two
    queries meet at the shared-prefix guard, on every batch."""
    assert derived_prefix("s3a://Data/chk/q") != derived_prefix("s3a://data/chk/q")


def test_a_derived_prefix_names_the_location_and_is_a_valid_prefix() -> None:
    prefix = derived_prefix("s3://bucket/checkpoints/Orders Enricher (eu)/")
    assert prefix.startswith("kafka-eos-Orders_Enricher_eu-")
    naming = TransactionalIdNaming(prefix, "0123abcd")
    assert naming.owns(naming.transactional_id(3, 1))
    assert len(derived_prefix("/" + "x" * 500)) == len("kafka-eos-") + 40 + 1 + 12


@pytest.mark.parametrize(
    ("transactional_id", "owned"),
    [
        ("orders-0123abcd-3-1", OwnedId("orders", "0123abcd")),
        ("kafka-eos-q-1-2-0123abcd-0-7", OwnedId("kafka-eos-q-1-2", "0123abcd")),  # from the right
        ("orders-0123abcd-3-32", None),  # no slot 32: not a kafka-eos id
        ("orders-3", None),  # a release before owners names no owner
        ("connect-cluster-0", None),
    ],
)
def test_an_id_names_its_prefix_and_owner(transactional_id: str, owned: OwnedId | None) -> None:
    assert OwnedId.parse(transactional_id) == owned
