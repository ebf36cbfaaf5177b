"""Secrets never appear in any output: text, JSON, errors."""

import json

import pytest

SECRETS = {
    "sasl.password": "pw-sasl-0001",
    "ssl.key.password": "pw-key-0002",
    "ssl.keystore.password": "pw-store-0003",
    "ssl.key.pem": "PEM-BODY-0004",
    "sasl.jaas.config": 'PlainLoginModule required username="u" password="pw-jaas-0005";',
    "sasl.oauthbearer.client.secret": "pw-oauth-0006",
}
LEAKS = [
    "pw-sasl-0001",
    "pw-key-0002",
    "pw-store-0003",
    "PEM-BODY-0004",
    "pw-jaas-0005",
    "pw-oauth-0006",
]


def properties(extra: str = "") -> str:
    return "".join(f"{k}={v}\n" for k, v in SECRETS.items()) + extra


def assert_clean(output: str) -> None:
    for secret in LEAKS:
        assert secret not in output


@pytest.mark.parametrize("output", [(), ("--json",)], ids=["text", "json"])
def test_secrets_in_every_config_never_printed(cli, write, output):
    result = cli(
        "--producer-config",
        write("p.properties", properties("transaction.timeout.ms=3600000\n")),
        "--consumer-config",
        write("c.properties", properties("isolation.level=read_uncommitted\n")),
        "--downstream-consumer-config",
        write("d.properties", properties()),
        "--broker-config",
        write("b.properties", properties("transactional.id.expiration.ms=1000\n")),
        *output,
    )
    assert result.exit_code == 1
    assert_clean(result.output)


def test_secret_used_as_a_transactional_id_is_not_special(cli, write):
    # Only secret *keys* are redacted; findings only ever name non-secret keys.
    result = cli("--producer-config", write("p.properties", properties()), "--json")
    report = json.loads(result.output)
    for finding in report["findings"]:
        assert not set(finding["values"]) & set(SECRETS)
    assert_clean(result.output)


def test_pipeline_file_secrets_not_printed(cli, write):
    sink = "".join(f"  kafka.{k}: '{v}'\n" for k, v in SECRETS.items())
    result = cli(
        "--config", write("p.yaml", f"sink:\n{sink}  kafka.transaction.timeout.ms: 3600000\n")
    )
    assert result.exit_code == 1
    assert_clean(result.output)


def test_secret_in_a_broken_yaml_line_not_printed(cli, write):
    result = cli("--config", write("p.yaml", "producer:\n  sasl.password: pw-sasl-0001: x\n"))
    assert result.exit_code == 2
    assert_clean(result.output)


def test_secret_in_a_malformed_kafka_option_not_printed(cli):
    result = cli("-X", "sasl.password:pw-sasl-0001")
    assert result.exit_code == 2
    assert_clean(result.output)


def test_secret_value_echoed_by_the_client_is_scrubbed(cli):
    # A secret that ends up as the value of another key must still not be printed.
    result = cli(
        "--bootstrap-servers",
        "127.0.0.1:1",
        "--cluster-timeout",
        "1s",
        "-X",
        "sasl.password=pw-sasl-0001",
        "-X",
        "client.id=pw-sasl-0001",
    )
    assert result.exit_code == 2
    assert_clean(result.output)


def test_malformed_escape_in_a_secret_is_an_input_error_without_the_value(cli, write):
    path = write("b.properties", "sasl.password=hunter2\\uZZZZ\n")
    result = cli("--producer-config", path)  # no traceback: the runner re-raises exceptions
    assert result.exit_code == 2
    assert f"{path}:1: the value of sasl.password has a malformed" in result.output
    assert "hunter2" not in result.output and "ZZZZ" not in result.output
