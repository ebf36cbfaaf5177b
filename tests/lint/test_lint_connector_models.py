"""The kafka-eos connectors as the linter sees them: the source through librdkafka, with the
settings it forces."""

from connectors.kafka.source.options import SourceOptions
from connectors.policy import LintInput
from connectors.policy.connector_models import SOURCE_CLIENT
from connectors.policy.context import LintContext

OPTIONS = {"kafka.bootstrap.servers": "k:9092", "subscribe": "orders"}


def source_options() -> SourceOptions:
    return SourceOptions.parse(OPTIONS, streaming=True)


def test_the_source_reads_through_librdkafka_with_its_default_isolation():
    assert SOURCE_CLIENT == "librdkafka"
    assert source_options().isolation_level == "read_committed"


def test_context_applies_the_forced_settings_over_the_consumer_config():
    lint_input = LintInput(
        client="java", consumer={"enable.auto.commit": "true"}, kafka_eos_source=True
    )
    source = LintContext.from_input(lint_input).source
    assert source is not None and source.client == "librdkafka"
    assert str(source.get("enable.auto.commit")) == (
        "source consumer enable.auto.commit=false (forced by the kafka-eos source)"
    )
    assert source.get("auto.offset.reset").value == "error"
    assert source.get("isolation.level").value == "read_committed"


def test_a_plain_consumer_keeps_its_client_and_defaults():
    source = LintContext.from_input(LintInput(client="java", consumer={})).source
    assert source is not None and source.client == "java" and not source.forced
    assert source.get("enable.auto.commit").value == "true"
