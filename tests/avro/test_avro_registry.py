"""The schema registry wrapper's own logic: subject names, its config, pickling, and that no
credential reaches a message. The round trip with a real registry is an integration test."""

from __future__ import annotations

import pickle

import pytest

from connectors.avro.registry import RegistryError, SchemaRegistry, client_config, subject_for

# Nothing listens on port 1: every call fails at once (max.retries 0), without a server.
UNREACHABLE = "http://127.0.0.1:1"


def test_subjects_follow_the_topic_name_strategy() -> None:
    assert subject_for("orders", is_key=False) == "orders-value"
    assert subject_for("orders", is_key=True) == "orders-key"


def test_the_config_takes_the_users_options() -> None:
    options = {
        "schema.registry.url": "http://registry:8081",
        "basic.auth.user.info": "bob:pw",
        "schema.registry.max.retries": "2",
        "timeout": "2.5",
    }
    assert client_config(options) == {
        "url": "http://registry:8081",
        "basic.auth.user.info": "bob:pw",
        "max.retries": 2,
        "timeout": 2.5,
    }


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"basic.auth.user.info": "bob:pw"}, r"no URL among the options .*schema.registry.url"),
        ({"url": UNREACHABLE, "max.retries": "many"}, r"max.retries='many' is not a number"),
    ],
)
def test_a_bad_config_is_a_clear_error(options: dict[str, str], message: str) -> None:
    with pytest.raises(RegistryError, match=message):
        SchemaRegistry(options)


def test_pickling_keeps_the_config_and_drops_the_client() -> None:
    registry = SchemaRegistry({"url": UNREACHABLE, "max.retries": "0"})
    with pytest.raises(RegistryError):
        registry.writer_schema(1)  # opens the client
    assert registry._client is not None
    copy = pickle.loads(pickle.dumps(registry))
    assert copy._client is None and copy._by_id == {}
    assert copy._config == registry._config


@pytest.mark.parametrize(
    "options",
    [
        {"url": "http://alice:s3cr%40t@127.0.0.1:1"},
        {"url": f"{UNREACHABLE},http://alice:s3cr%40t@127.0.0.1:2"},
        {"url": UNREACHABLE, "basic.auth.user.info": "alice:s3cr@t"},
    ],
)
def test_no_credential_reaches_an_error(options: dict[str, str]) -> None:
    registry = SchemaRegistry({**options, "max.retries": "0"})
    calls = [
        lambda: registry.writer_schema(7),
        lambda: registry.latest("orders-value"),
        lambda: registry.register("orders-value", "string"),
    ]
    for call in calls:
        with pytest.raises(RegistryError) as raised:
            call()
        text = str(raised.value) + repr(raised.value.__dict__)
        assert "s3cr" not in text and "alice" not in text
        assert raised.value.__cause__ is None and raised.value.__suppress_context__
        assert "127.0.0.1:1" in text and raised.value.code == "KAFKA_EOS.AVRO.REGISTRY_FAILED"
    assert "orders-value" in str(raised.value)
