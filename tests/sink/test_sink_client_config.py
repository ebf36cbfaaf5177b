"""One client config for both libraries: librdkafka keys in, kafka-python keywords out.

The committer's admin connection must reach the same cluster with the same credentials as the
producer; a key that is not translated would connect it unauthenticated.
"""

from __future__ import annotations

import pytest

from checkpoint.errors import ConfigError
from connectors.kafka.client_config import kafka_python_config


def test_connection_keys_are_translated() -> None:
    assert kafka_python_config(
        {"bootstrap.servers": "b1:9092,b2:9092", "client.id": "eos", "request.timeout.ms": "15000"}
    ) == {"bootstrap_servers": "b1:9092,b2:9092", "client_id": "eos", "request_timeout_ms": 15000}


def test_sasl_ssl_keys_are_translated() -> None:
    config = {
        "security.protocol": "sasl_ssl",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "svc",
        "sasl.password": "pw",
        "ssl.ca.location": "/etc/ca.pem",
        "ssl.certificate.location": "/etc/cert.pem",
        "ssl.key.location": "/etc/key.pem",
        "ssl.key.password": "kpw",
    }
    assert kafka_python_config(config) == {
        "security_protocol": "SASL_SSL",  # kafka-python only knows the upper-case names
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "svc",
        "sasl_plain_password": "pw",
        "ssl_cafile": "/etc/ca.pem",
        "ssl_certfile": "/etc/cert.pem",
        "ssl_keyfile": "/etc/key.pem",
        "ssl_password": "kpw",
    }


def test_librdkafka_plural_sasl_mechanisms_is_understood() -> None:
    assert kafka_python_config({"sasl.mechanisms": "SCRAM-SHA-512"}) == {
        "sasl_mechanism": "SCRAM-SHA-512"
    }


@pytest.mark.parametrize(
    "key", ["transaction.timeout.ms", "linger.ms", "acks", "enable.idempotence", "log_level"]
)
def test_producer_only_keys_are_dropped(key: str) -> None:
    """kafka-python's admin client rejects keywords it does not know."""
    assert kafka_python_config({"bootstrap.servers": "b:9092", key: "1"}) == {
        "bootstrap_servers": "b:9092"
    }


def test_the_input_is_not_modified() -> None:
    config = {"security.protocol": "ssl", "request.timeout.ms": "100"}
    kafka_python_config(config)
    assert config == {"security.protocol": "ssl", "request.timeout.ms": "100"}


def test_gssapi_service_name_and_host_name_check_are_translated() -> None:
    config = {
        "sasl.mechanism": "GSSAPI",
        "sasl.kerberos.service.name": "kafka-prod",
        "ssl.endpoint.identification.algorithm": "none",
    }
    assert kafka_python_config(config) == {
        "sasl_mechanism": "GSSAPI",
        "sasl_kerberos_service_name": "kafka-prod",
        "ssl_check_hostname": False,
    }
    checked = kafka_python_config({"ssl.endpoint.identification.algorithm": "https"})
    assert "ssl_check_hostname" not in checked  # kafka-python checks by default, as librdkafka


def test_a_mechanism_the_admin_cannot_log_in_with_is_refused_by_name() -> None:
    with pytest.raises(ConfigError) as refused:
        kafka_python_config({"sasl.mechanisms": "oauthbearer", "sasl.oauthbearer.method": "oidc"})
    message = str(refused.value)
    assert "sasl.mechanism = 'OAUTHBEARER'" in message
    assert "PLAIN, SCRAM-SHA-256/512 or GSSAPI" in message
