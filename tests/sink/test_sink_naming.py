"""Transactional-id naming: stable per task, and recognisable by prefix for recovery.

Recovery aborts every open transaction its prefix owns, so owning too much would abort another
query's transactions (a longer prefix), and owning too little would leave lingering ones.
"""

from __future__ import annotations

import pytest

from connectors.kafka.naming import is_owned_by, transactional_id


def test_transactional_id_is_prefix_dash_task_partition() -> None:
    assert transactional_id("orders-enricher", 0) == "orders-enricher-0"
    assert transactional_id("orders-enricher", 17) == "orders-enricher-17"


@pytest.mark.parametrize("partition", [0, 1, 9, 10, 123])
def test_every_named_id_is_owned_by_its_prefix(partition: int) -> None:
    assert is_owned_by("q", transactional_id("q", partition))


@pytest.mark.parametrize(
    "candidate",
    [
        "prefix-x-1",  # the ids of a query whose prefix is 'prefix-x'
        "prefix-1-2",
        "prefix-",
        "prefix",
        "prefix-1a",
        "prefix1",
        "other-prefix-1",
        "prefix-1\n",
    ],
)
def test_ids_of_other_prefixes_are_not_owned(candidate: str) -> None:
    assert not is_owned_by("prefix", candidate)


def test_a_longer_prefix_owns_its_own_ids_only() -> None:
    assert is_owned_by("prefix-x", "prefix-x-1")
    assert not is_owned_by("prefix-x", "prefix-1")


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
    assert is_owned_by(prefix, transactional_id(prefix, 3))
    assert not is_owned_by(prefix, foreign)
