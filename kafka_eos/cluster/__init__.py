"""Real Apache Kafka for the demo and the tests: KRaft nodes started from Maven Central jars.

``ProcessCluster`` runs each node as a local JVM process; the Docker image built by
``docker/kafka/build.sh`` runs the same jars with the same base configuration
(``docker/kafka/server.properties``) and is driven by ``integration_tests/kafka_containers.py``.
"""

from kafka_eos.cluster.base import (
    DEFAULT_KAFKA_VERSION,
    SUPPORTED_KAFKA_VERSIONS,
    KafkaCluster,
    multi_node_defaults,
    wait_until_ready,
)
from kafka_eos.cluster.jars import kafka_libs
from kafka_eos.cluster.process import ProcessCluster

__all__ = [
    "DEFAULT_KAFKA_VERSION",
    "SUPPORTED_KAFKA_VERSIONS",
    "KafkaCluster",
    "ProcessCluster",
    "kafka_libs",
    "multi_node_defaults",
    "wait_until_ready",
]
