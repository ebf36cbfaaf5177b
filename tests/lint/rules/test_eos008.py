"""EOS008: missing or per-run transactional ids."""

import pytest

from connectors.policy.rules.eos008_transactional_id_unstable import unstable_reason


def test_missing_id_and_prefix_fires(lint):
    [finding] = lint("EOS008", producer={"acks": "all"})
    assert finding.severity == "error"
    assert finding.keys == ("transactional.id", "transactionalIdPrefix")
    assert finding.values == {}


def test_stable_transactional_id_passes(lint):
    assert lint("EOS008", producer={"transactional.id": "orders-enrich-v1-0"}) == []


def test_stable_sink_prefix_passes_without_producer_config(lint):
    assert lint("EOS008", sink_options={"transactionalIdPrefix": "orders-enrich-v1"}) == []


def test_prefix_option_name_is_case_insensitive(lint):
    assert lint("EOS008", producer={}, sink_options={"transactionalidprefix": "orders-v1"}) == []


def test_unstable_prefix_fires(lint):
    sink = {"transactionalIdPrefix": "orders-{uuid}"}
    [finding] = lint("EOS008", sink_options=sink)
    assert "sink option transactionalIdPrefix=orders-{uuid}" in finding.message


def test_nothing_known_does_not_fire(lint):
    assert lint("EOS008") == []


@pytest.mark.parametrize(
    "value",
    [
        "orders-3f2b9c1e-8d4a-4c7e-9b1f-2a6d5e7c8f90",
        "orders-3f2b9c1e8d4a4c7e9b1f2a6d5e7c8f90",
        "orders_9f86d081884c7d65",
        "orders-1700000000",
        "orders-1700000000123",
        "orders-2024-05-01T10:30",
        "orders-20240501_1030",
        "orders-${random.uuid}",
        "orders-{timestamp}",
        "orders-$(hostname)",
    ],
)
def test_per_run_ids_are_unstable(value):
    assert unstable_reason(value) is not None


@pytest.mark.parametrize(
    "value",
    [
        "orders-enrich-v1",
        "payments-eu-west-1-7",
        "orders-2024",
        "orders-{partition}",
        "deadbeefcafebabe",
    ],
)
def test_stable_ids(value):
    assert unstable_reason(value) is None
