"""One Kafka client configuration, spoken to both client libraries.

Users give librdkafka (confluent-kafka) keys, as Spark users give ``kafka.*`` options. The
transaction admin requests go through kafka-python, whose keyword names differ; this module
translates the connection and security keys, the only ones an admin connection needs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# librdkafka key -> kafka-python keyword.
_KAFKA_PYTHON_KEYS: dict[str, str] = {
    "bootstrap.servers": "bootstrap_servers",
    "client.id": "client_id",
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.mechanisms": "sasl_mechanism",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
    "request.timeout.ms": "request_timeout_ms",
}
_INT_KEYS = {"request_timeout_ms"}


def kafka_python_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The kafka-python keywords for a librdkafka-style ``config``; other keys are dropped."""
    translated: dict[str, Any] = {}
    for key, value in config.items():
        target = _KAFKA_PYTHON_KEYS.get(key)
        if target is not None:
            translated[target] = int(value) if target in _INT_KEYS else value
    if "security_protocol" in translated:
        translated["security_protocol"] = str(translated["security_protocol"]).upper()
    return translated
