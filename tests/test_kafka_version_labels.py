"""The integration tests' Kafka version labels: a release, or a release with the
``transaction.version`` its cluster is formatted with (``4.3.1-tv1``). The fixtures format the
cluster from the label and then check the running cluster against it
(``integration_tests/kafka_fixtures.py``); a label must name exactly one expectation."""

from __future__ import annotations

import pytest

from integration_tests.kafka_fixtures import (
    VERIFICATION,
    ClusterSpec,
    cluster_spec,
    expected_transaction_version,
)
from kafka_eos.cluster.base import format_feature_args, render_features

OFF = {VERIFICATION: "false"}


@pytest.mark.parametrize(
    ("label", "release", "features", "properties", "tv"),
    [
        ("4.3.1", "4.3.1", {}, {}, 2),
        ("4.4.0", "4.4.0", {}, {}, 2),
        ("3.9.2", "3.9.2", {}, {}, None),
        ("3.5.2", "3.5.2", {}, {}, None),
        ("3.9.2-nv", "3.9.2", {}, OFF, None),
        ("4.3.1-tv1", "4.3.1", {"transaction.version": 1}, {}, 1),
        ("4.3.1-tv0", "4.3.1", {"transaction.version": 0}, {}, None),  # 0 is not finalized
        ("4.3.1-tv1-nv", "4.3.1", {"transaction.version": 1}, OFF, 1),
    ],
)
def test_a_label_names_the_release_its_format_features_and_the_expected_level(
    label: str, release: str, features: dict[str, int], properties: dict[str, str], tv: int | None
) -> None:
    assert cluster_spec(label) == ClusterSpec(release, features, properties)
    assert expected_transaction_version(label) == tv


@pytest.mark.parametrize("label", ["4.3", "4.3.1-tv", "4.3.1-v1", "latest", "3.9.2-nv-tv1"])
def test_a_malformed_label_is_refused(label: str) -> None:
    with pytest.raises(ValueError, match="Kafka version label"):
        cluster_spec(label)


def test_features_become_storage_format_arguments_and_the_images_variable() -> None:
    features = {"transaction.version": 1, "group.version": 1}
    assert format_feature_args(features) == [
        "--feature",
        "group.version=1",
        "--feature",
        "transaction.version=1",
    ]
    assert render_features(features) == "group.version=1,transaction.version=1"
    assert format_feature_args({}) == [] and render_features({}) == ""
