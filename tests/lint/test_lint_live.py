"""Reading a live cluster, with a fake AdminClient (no broker) and an unreachable one."""

import time
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

from connectors.kafka.cluster_facts import read_cluster
from connectors.policy import LiveClusterError


class Entry(SimpleNamespace):
    def __init__(self, value, is_sensitive=False):
        super().__init__(value=value, is_sensitive=is_sensitive)


class Done:
    def __init__(self, value):
        self.value = value

    def result(self, timeout):
        assert timeout > 0
        return self.value


def partitions(*replica_counts):
    return {i: SimpleNamespace(replicas=list(range(n))) for i, n in enumerate(replica_counts)}


class FakeAdmin:
    """Two brokers (controller 2), topics out (RF 1 on one partition), src, __transaction_state."""

    broker_1_max = "300000"

    def __init__(self, config):
        self.config = config
        self.described = []

    def poll(self, timeout):
        return 0

    def list_topics(self, timeout):
        assert timeout > 0
        topics = {
            "out": SimpleNamespace(partitions=partitions(2, 1)),
            "src": SimpleNamespace(partitions=partitions(2)),
            "__transaction_state": SimpleNamespace(partitions=partitions(2, 2)),
        }
        return SimpleNamespace(brokers={1: None, 2: None}, controller_id=2, topics=topics)

    def describe_configs(self, resources, request_timeout):
        assert request_timeout > 0
        # As confluent-kafka: "Only one ConfigResource of type BROKER is allowed per call".
        assert sum(r.restype.name == "BROKER" for r in resources) <= 1
        self.described += [(r.restype.name, r.name) for r in resources]
        configs = {
            ("BROKER", "2"): {
                "transaction.max.timeout.ms": Entry("300000"),
                "log.retention.ms": Entry(None),
                "sasl.password": Entry(None, is_sensitive=True),
            },
            ("BROKER", "1"): {"transaction.max.timeout.ms": Entry(self.broker_1_max)},
            ("TOPIC", "out"): {"min.insync.replicas": Entry("1")},
            ("TOPIC", "src"): {"retention.ms": Entry("3600000")},
        }
        return {r: Done(configs[(r.restype.name, r.name)]) for r in resources}


def test_reads_broker_config_counts_and_topic_facts():
    admins = []

    def factory(config):
        admins.append(FakeAdmin(config))
        return admins[-1]

    snapshot = read_cluster(
        "k:9092",
        ["out", "src", "missing"],
        options={"security.protocol": "SSL"},
        admin_factory=factory,
    )
    [admin] = admins
    assert admin.config["bootstrap.servers"] == "k:9092"
    assert admin.config["security.protocol"] == "SSL"
    assert admin.described == [  # the controller first, with the topics; then each broker
        ("BROKER", "2"),
        ("TOPIC", "out"),
        ("TOPIC", "src"),
        ("BROKER", "1"),
    ]
    assert snapshot.broker_config == {"transaction.max.timeout.ms": "300000"}
    assert snapshot.facts.broker_count == 2
    assert snapshot.facts.topics["out"].replication_factor == 1
    assert snapshot.facts.topics["out"].config == {"min.insync.replicas": "1"}
    assert snapshot.facts.topics["src"].config == {"retention.ms": "3600000"}
    assert snapshot.facts.topics["__transaction_state"].replication_factor == 2
    assert "missing" not in snapshot.facts.topics


def test_client_errors_become_live_cluster_errors_without_secrets():
    class Failing(FakeAdmin):
        def list_topics(self, timeout):
            raise KafkaException(f"auth failed with {self.config['sasl.password']}")

    with pytest.raises(LiveClusterError) as caught:
        read_cluster("k:9092", [], options={"sasl.password": "hunter2"}, admin_factory=Failing)
    assert "hunter2" not in str(caught.value)
    assert "cluster k:9092" in str(caught.value)


def test_no_brokers_is_an_error():
    class Empty(FakeAdmin):
        def list_topics(self, timeout):
            return SimpleNamespace(brokers={}, controller_id=-1, topics={})

    with pytest.raises(LiveClusterError, match="no brokers"):
        read_cluster("k:9092", [], admin_factory=Empty)


def test_expired_deadline_is_an_error_not_a_hang():
    class Slow(FakeAdmin):
        def list_topics(self, timeout):
            time.sleep(timeout + 0.01)  # answers, but only after the whole budget is spent
            return super().list_topics(timeout)

    # The cause keeps its own code inside the message.
    cause = r"\[KAFKA_EOS\.CLUSTER\.DEADLINE_EXCEEDED\] describe_configs did not finish"
    with pytest.raises(LiveClusterError, match=rf"cluster k:9092: {cause}"):
        read_cluster("k:9092", ["out"], timeout_s=0.05, admin_factory=Slow)


def test_unreachable_cluster_fails_within_the_deadline():
    started = time.monotonic()
    with pytest.raises(LiveClusterError, match=r"cluster 127\.0\.0\.1:1"):
        read_cluster("127.0.0.1:1", ["out"], timeout_s=1.0)
    assert time.monotonic() - started < 5


def test_named_topics_the_cluster_lacks_are_listed_as_missing():
    snapshot = read_cluster(
        "k:9092", (t for t in ["out", "missing", "gone", "missing"]), admin_factory=FakeAdmin
    )
    assert snapshot.facts.missing_topics == {"missing", "gone"}
    assert "out" in snapshot.facts.topics


def test_a_rejected_login_is_named_at_once_not_at_the_deadline():
    """librdkafka tells of a wrong password only through error_cb, and keeps retrying."""

    class Rejected(FakeAdmin):
        def list_topics(self, timeout):
            reason = "SASL authentication error: Invalid username or password (hunter2?)"
            self.config["error_cb"](KafkaError(KafkaError._AUTHENTICATION, reason))
            raise KafkaException(KafkaError(KafkaError._TRANSPORT, "Broker transport failure"))

    started = time.monotonic()
    with pytest.raises(LiveClusterError) as caught:
        read_cluster("k:9092", [], options={"sasl.password": "hunter2"}, admin_factory=Rejected)
    assert time.monotonic() - started < 5  # the default deadline is 15 s
    message = str(caught.value)
    assert "cluster k:9092: authentication failed" in message
    assert "Invalid username or password" in message and "hunter2" not in message
    assert "kafka.sasl.username / kafka.sasl.password" in message


def test_metadata_is_asked_again_while_librdkafka_is_still_trying():
    class SlowStart(FakeAdmin):
        calls = 0

        def list_topics(self, timeout):
            SlowStart.calls += 1
            if SlowStart.calls < 3:
                raise KafkaException(KafkaError(KafkaError._TRANSPORT, "not yet"))
            return super().list_topics(timeout)

    snapshot = read_cluster("k:9092", ["out"], admin_factory=SlowStart)
    assert SlowStart.calls == 3 and snapshot.facts.broker_count == 2


@pytest.mark.parametrize(("broker_1_max", "smallest"), [("120000", "120000"), ("900000", "300000")])
def test_the_smallest_transaction_maximum_of_all_brokers_counts(broker_1_max, smallest):
    """Mid-way through a rolling change of transaction.max.timeout.ms, a coordinator on a
    broker not yet changed refuses a timeout above its own maximum."""

    class Rolling(FakeAdmin):
        pass

    Rolling.broker_1_max = broker_1_max
    snapshot = read_cluster("k:9092", [], admin_factory=Rolling)
    assert snapshot.broker_config["transaction.max.timeout.ms"] == smallest
