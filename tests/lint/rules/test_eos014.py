"""EOS014: offset reset policies that silently skip."""

import pytest


@pytest.mark.parametrize(("client", "loud"), [("librdkafka", "error"), ("java", "none")])
def test_default_reset_skips(lint, client, loud):
    [finding] = lint("EOS014", client=client, consumer={})
    assert finding.severity == "warning"
    assert f"or {loud} (fail loudly)" in finding.fix


@pytest.mark.parametrize("value", ["latest", "largest", "end", "LATEST"])
def test_skipping_values_fire(lint, value):
    assert lint("EOS014", consumer={"auto.offset.reset": value})


@pytest.mark.parametrize("value", ["earliest", "smallest", "beginning", "none", "error"])
def test_safe_values_pass(lint, value):
    assert lint("EOS014", consumer={"auto.offset.reset": value}) == []


def test_spark_fail_on_data_loss_false_fires(lint):
    [finding] = lint("EOS014", source_options={"failOnDataLoss": "false"})
    assert finding.keys == ("failOnDataLoss",)


def test_spark_option_name_is_case_insensitive(lint):
    assert lint("EOS014", source_options={"failondataloss": "False"})


def test_spark_fail_on_data_loss_true_passes(lint):
    assert lint("EOS014", source_options={"failOnDataLoss": "true"}) == []


@pytest.mark.parametrize("client", ["java", "librdkafka"])
def test_kafka_eos_source_forces_a_loud_reset(lint, client):
    assert lint("EOS014", client=client, consumer={}, kafka_eos_source=True) == []


def test_kafka_eos_source_option_it_refuses_is_reported_with_removal_as_the_fix(
    refused_source_option,
):
    finding = refused_source_option("EOS014", "auto.offset.reset", "latest")
    assert "startingOffsets" in finding.fix
