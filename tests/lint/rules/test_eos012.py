"""EOS012: consumers not on read_committed."""

from connectors.policy import ConsumerInput


def test_librdkafka_default_is_read_committed(lint):
    assert lint("EOS012", consumer={}) == []


def test_java_default_is_read_uncommitted(lint):
    [finding] = lint("EOS012", client="java", consumer={})
    assert finding.severity == "error"
    assert "source consumer isolation.level=read_uncommitted (java default)" in finding.message


def test_explicit_read_uncommitted_fires_for_any_client(lint):
    [finding] = lint("EOS012", consumer={"isolation.level": "read_uncommitted"})
    assert "aborted" in finding.message


def test_downstream_consumer_with_its_own_client(lint):
    downstream = (
        ConsumerInput("billing", {}, client="java"),
        ConsumerInput("audit", {"isolation.level": "read_committed"}, client="java"),
        ConsumerInput("search", {}),
    )
    [finding] = lint("EOS012", downstream_consumers=downstream)
    assert finding.message.startswith(
        "downstream consumer billing isolation.level=read_uncommitted"
    )
    assert "twice" in finding.message


def test_no_consumers_do_not_fire(lint):
    assert lint("EOS012", client="java") == []


def test_kafka_eos_source_reads_through_librdkafka_whatever_the_client(lint):
    assert lint("EOS012", client="java", consumer={}, kafka_eos_source=True) == []
    [finding] = lint(
        "EOS012",
        client="java",
        consumer={"isolation.level": "read_uncommitted"},
        kafka_eos_source=True,
    )
    assert "source consumer isolation.level=read_uncommitted" in finding.message
