"""One Kafka client configuration, spoken to both client libraries.

Users give librdkafka (confluent-kafka) keys, as Spark users give ``kafka.*`` options. The
transaction admin requests go through kafka-python, whose keyword names differ; this module
translates the connection and security keys, the only ones an admin connection needs.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from checkpoint.errors import ConfigError

# librdkafka's log lines (a retry, a refused connection) as records of this Python logger, set
# as every confluent-kafka client's ``logger``, instead of raw ``%4|...|`` lines on stderr.
# Like any library's, it shows nothing until the application configures logging (a
# NullHandler): what matters reaches the user as the sink's or the source's own errors.
LIBRDKAFKA_LOGGER = logging.getLogger("kafka_eos.librdkafka")
LIBRDKAFKA_LOGGER.addHandler(logging.NullHandler())

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
    "sasl.kerberos.service.name": "sasl_kerberos_service_name",
}
_INT_KEYS = {"request_timeout_ms"}
# Mechanisms whose credentials librdkafka builds from its keys but kafka-python only takes as
# a Python object, which options cannot carry.
_ADMIN_CANNOT_LOG_IN = {"OAUTHBEARER"}


def kafka_python_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The kafka-python keywords for a librdkafka-style ``config``; other keys are dropped."""
    translated: dict[str, Any] = {}
    for key, value in config.items():
        target = _KAFKA_PYTHON_KEYS.get(key)
        if target is not None:
            translated[target] = int(value) if target in _INT_KEYS else value
    if "security_protocol" in translated:
        translated["security_protocol"] = str(translated["security_protocol"]).upper()
    mechanism = str(translated.get("sasl_mechanism", "")).upper()
    if mechanism in _ADMIN_CANNOT_LOG_IN:
        # Connecting without it would fail later as an obscure authentication error.
        raise ConfigError(
            f"sasl.mechanism = {mechanism!r}: the driver's transaction admin (kafka-python) "
            "needs a token provider object for it, which kafka.* options cannot carry, so it "
            "could not commit. Give the sink a principal that logs in with PLAIN, "
            "SCRAM-SHA-256/512 or GSSAPI"
        )
    # librdkafka checks the broker's host name unless this is "none"; so does kafka-python.
    if str(config.get("ssl.endpoint.identification.algorithm", "https")).lower() == "none":
        translated["ssl_check_hostname"] = False
    return translated
