"""EOS010: __transaction_state replication the cluster cannot satisfy."""

from connectors.policy import ClusterFacts, TopicFacts

SINGLE_BROKER = ClusterFacts(broker_count=1)


def test_default_replication_on_one_broker_fires(lint):
    [finding] = lint("EOS010", broker={}, cluster=SINGLE_BROKER)
    assert finding.severity == "error"
    assert "transaction.state.log.replication.factor=3" in finding.message
    assert finding.values["broker_count"] == "1"


def test_single_broker_settings_pass(lint):
    broker = {"transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1"}
    assert lint("EOS010", broker=broker, cluster=SINGLE_BROKER) == []


def test_unknown_broker_count_skips_the_count_check(lint):
    assert lint("EOS010", broker={}) == []


def test_min_isr_above_configured_replication_fires(lint):
    broker = {"transaction.state.log.replication.factor": "2", "transaction.state.log.min.isr": "3"}
    [finding] = lint("EOS010", broker=broker)
    assert "NOT_ENOUGH_REPLICAS" in finding.message


def test_existing_topic_replication_wins_over_config(lint):
    cluster = ClusterFacts(
        broker_count=1, topics={"__transaction_state": TopicFacts(replication_factor=1)}
    )
    [finding] = lint("EOS010", broker={}, cluster=cluster)
    assert "topic __transaction_state replication.factor=1" in finding.message
    assert "transaction.state.log.min.isr=2" in finding.message


def test_unknown_broker_does_not_fire(lint):
    assert lint("EOS010", cluster=SINGLE_BROKER) == []
