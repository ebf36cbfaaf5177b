"""EOS011: output topics that can lose committed records."""

from connectors.policy import ClusterFacts, TopicFacts, build_report


def cluster(**topics: TopicFacts) -> ClusterFacts:
    return ClusterFacts(topics=topics)


def test_replication_factor_one_fires_for_rf_and_min_isr(lint):
    findings = lint("EOS011", output_topics=("out",), cluster=cluster(out=TopicFacts(1)))
    assert [f.severity for f in findings] == ["warning", "warning"]
    assert "topic out replication.factor=1 is below 3" in findings[0].message
    assert (
        "min.insync.replicas=1 (inherited from broker, Apache Kafka default)" in findings[1].message
    )


def test_durable_topic_passes(lint):
    facts = TopicFacts(3, {"min.insync.replicas": "2"})
    assert lint("EOS011", output_topics=("out",), cluster=cluster(out=facts)) == []


def test_topic_named_by_the_sink_option(lint):
    facts = TopicFacts(3, {"min.insync.replicas": "2", "unclean.leader.election.enable": "true"})
    [finding] = lint("EOS011", sink_options={"topic": "out"}, cluster=cluster(out=facts))
    assert "unclean.leader.election.enable=true" in finding.message


def test_broker_level_settings_are_inherited(lint):
    broker = {"min.insync.replicas": "2", "unclean.leader.election.enable": "true"}
    [finding] = lint(
        "EOS011", output_topics=("out",), broker=broker, cluster=cluster(out=TopicFacts(3))
    )
    assert "inherited from broker" in finding.message
    assert finding.keys == ("unclean.leader.election.enable",)


def test_undescribed_topic_does_not_fire(lint):
    assert lint("EOS011", output_topics=("out",)) == []


def test_options(lint):
    options = {"EOS011": {"min_replication_factor": 1, "min_insync_replicas": 1}}
    facts = cluster(out=TopicFacts(1))
    assert lint("EOS011", output_topics=("out",), cluster=facts, rule_options=options) == []


def test_topic_missing_on_the_live_cluster_is_an_info_finding(lint, validate):
    facts = ClusterFacts(missing_topics=frozenset({"out"}))
    [finding] = lint("EOS011", output_topics=("out", "other"), cluster=facts)
    assert finding.severity == "info"
    assert finding.message.startswith("output topic out does not exist on the cluster")
    assert finding.values == {"topic": "out"}
    assert validate(build_report([finding], ["EOS011"], "librdkafka")) == []
