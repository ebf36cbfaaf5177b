"""The Java client's security keys, translated by the key table, log in to a real broker:
a PLAIN JAAS entry on a SASL listener, and a PEM truststore on a TLS listener, read as a Spark
user writes them (connectors/kafka_keys.py). The source's admin client, built from the
parsed options as the driver builds it, reads the cluster's metadata through each."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from connectors.kafka.sink.options import SinkOptions
from connectors.kafka.source.client import open_admin
from connectors.kafka.source.options import SourceOptions
from kafka_eos.cluster import ProcessCluster

pytestmark = [pytest.mark.kafka]

USER, PASSWORD = "spark-user", "spark-user-secret"
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    f'username="{USER}" password="{PASSWORD}";'
)


@pytest.fixture(scope="module")
def cluster() -> Iterator[ProcessCluster]:
    with ProcessCluster(sasl_users={USER: PASSWORD}, tls=True) as k:
        yield k


def _brokers_seen(options: dict[str, str]) -> int:
    admin = open_admin(SourceOptions.parse({**options, "subscribe": "any"}, streaming=True))
    return len(admin.list_topics(timeout=30).brokers)


def test_a_jaas_entry_and_a_pem_truststore_log_in_as_the_java_client_would(
    cluster: ProcessCluster,
) -> None:
    sasl = {
        "kafka.bootstrap.servers": cluster.sasl_bootstrap_servers,
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "PLAIN",
        "kafka.sasl.jaas.config": JAAS,
    }
    assert _brokers_seen(sasl) == 1
    # The sink translates it the same way, for its producers and its transaction admin.
    producer = SinkOptions.parse({**sasl, "topic": "t", "deliveryGuarantee": "none"})
    assert (
        producer.producer_config["sasl.username"],
        producer.producer_config["sasl.password"],
    ) == (
        USER,
        PASSWORD,
    )
    tls = {
        "kafka.bootstrap.servers": cluster.tls_bootstrap_servers,
        "kafka.security.protocol": "SSL",
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": cluster.tls_ca_location,
    }
    assert _brokers_seen(tls) == 1
