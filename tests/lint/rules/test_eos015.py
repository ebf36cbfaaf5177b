"""EOS015: source retention shorter than the max checkpoint age."""

from connectors.policy import ClusterFacts, Timing, TopicFacts

WEEK = Timing(max_checkpoint_age_ms=604_800_000)


def topics(**configs: dict[str, str]) -> ClusterFacts:
    return ClusterFacts(
        topics={name: TopicFacts(config=config) for name, config in configs.items()}
    )


def test_short_retention_of_a_subscribed_topic_fires(lint):
    [finding] = lint(
        "EOS015",
        source_options={"subscribe": "orders,refunds"},
        cluster=topics(orders={"retention.ms": "86400000"}),
        timing=WEEK,
    )
    assert finding.severity == "error"
    assert "topic orders retention.ms=86400000 (1d)" in finding.message
    assert "7d" in finding.message


def test_infinite_retention_passes(lint):
    assert (
        lint(
            "EOS015",
            source_topics=("orders",),
            cluster=topics(orders={"retention.ms": "-1"}),
            timing=WEEK,
        )
        == []
    )


def test_broker_retention_hours_are_inherited(lint):
    [finding] = lint(
        "EOS015",
        source_options={"assign": '{"orders": [0, 1]}'},
        broker={"log.retention.hours": "24"},
        cluster=topics(orders={}),
        timing=WEEK,
    )
    assert (
        "retention.ms=86400000 (1d, inherited from broker, log.retention.hours=24)"
        in finding.message
    )


def test_default_retention_covers_default_checkpoint_age(lint):
    assert lint("EOS015", source_topics=("orders",), cluster=topics(orders={})) == []


def test_undescribed_topic_does_not_fire(lint):
    assert lint("EOS015", source_topics=("orders",), timing=WEEK) == []


def test_topic_missing_on_the_live_cluster_is_an_info_finding(lint):
    facts = ClusterFacts(missing_topics=frozenset({"orders"}))
    [finding] = lint("EOS015", source_options={"subscribe": "orders"}, cluster=facts)
    assert finding.severity == "info"
    assert finding.message.startswith("source topic orders does not exist on the cluster")
    assert finding.values == {"topic": "orders"}
