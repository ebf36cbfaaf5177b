"""The one table of Java-client keys: each translated to librdkafka or refused with the key to
use, in the same words on both sides, and checked by librdkafka at option parsing."""

from __future__ import annotations

import gc
import os
import re
import time
from pathlib import Path

import pytest

from connectors.kafka.sink.errors import SinkOptionError
from connectors.kafka.sink.options import SinkOptions
from connectors.kafka.source.errors import SourceOptionError
from connectors.kafka.source.options import SourceOptions
from connectors.kafka_keys import JAVA_KEYS, SINK, SOURCE, KeyRefused, java_keys_table

ROOT = Path(__file__).resolve().parents[1]
SINK_BASE = {
    "kafka.bootstrap.servers": "k:9092",
    "topic": "out",
    "deliveryGuarantee": "at_least_once",
}
SOURCE_BASE = {"kafka.bootstrap.servers": "k:9092", "subscribe": "orders"}
PLAIN = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="alice" password="pa ss\\"word";'
)
SCRAM = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required username=bob password=s3cret;"
)


def sink_config(**kafka: str) -> dict[str, str]:
    options = {**SINK_BASE, **{f"kafka.{k}": v for k, v in kafka.items()}}
    config = SinkOptions.parse(options).producer_config
    # Without the sink's own defaults (Java's record size limit), which the source lacks.
    return {
        k: v for k, v in config.items() if k != "bootstrap.servers" and SINK.defaults.get(k) != v
    }


def both_errors(**kafka: str) -> tuple[str, str]:
    """The fix each side gives for the same kafka.* options."""
    options = {f"kafka.{k}": v for k, v in kafka.items()}
    with pytest.raises(SinkOptionError) as sink:
        SinkOptions.parse({**SINK_BASE, **options})
    with pytest.raises(SourceOptionError) as source:
        SourceOptions.parse({**SOURCE_BASE, **options}, streaming=True)
    return sink.value.fix, source.value.fix


@pytest.mark.parametrize(
    ("java", "settings"),
    [
        ({"max.request.size": "2097152"}, {"message.max.bytes": "2097152"}),
        ({"buffer.memory": "33554432"}, {"queue.buffering.max.kbytes": "32768"}),
        ({"buffer.memory": "1000"}, {"queue.buffering.max.kbytes": "1"}),
        (
            {"partitioner.class": "org.apache.kafka.clients.producer.internals.DefaultPartitioner"},
            {"partitioner": "murmur2_random"},
        ),
        (
            {"sasl.mechanism": "PLAIN", "sasl.jaas.config": PLAIN},
            {"sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": 'pa ss"word'},
        ),
        (
            {"sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": SCRAM},
            {"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bob", "sasl.password": "s3cret"},
        ),
        (
            {"ssl.truststore.type": "PEM", "ssl.truststore.location": "/etc/ca.pem"},
            {"ssl.ca.location": "/etc/ca.pem"},
        ),
        (
            {
                "ssl.keystore.type": "PKCS12",
                "ssl.keystore.location": "/k.p12",
                "ssl.keystore.password": "p",
            },
            {"ssl.keystore.location": "/k.p12", "ssl.keystore.password": "p"},
        ),
        ({"send.buffer.bytes": "131072"}, {"socket.send.buffer.bytes": "131072"}),
    ],
)
def test_java_keys_with_an_equivalent_are_translated_on_both_sides(
    java: dict[str, str], settings: dict[str, str]
) -> None:
    assert sink_config(**java) == settings
    source = SourceOptions.parse(
        {**SOURCE_BASE, **{f"kafka.{k}": v for k, v in java.items()}}, streaming=True
    )
    assert source.client_config == settings


@pytest.mark.parametrize(
    ("java", "key", "fix"),
    [
        ({"max.block.ms": "60000"}, "max.block.ms", "flushTimeoutMs and commitTimeoutMs"),
        (
            {"partitioner.class": "com.acme.RegionPartitioner"},
            "partitioner.class",
            "kafka.partitioner",
        ),
        ({"sasl.jaas.config": PLAIN}, "sasl.jaas.config", "set kafka.sasl.mechanism (PLAIN)"),
        (
            {"sasl.mechanism": "PLAIN", "sasl.jaas.config": PLAIN.replace("required", "optional")},
            "sasl.jaas.config",
            "librdkafka has no JAAS",
        ),
        (
            {"sasl.mechanism": "PLAIN", "sasl.jaas.config": PLAIN.replace(";", ' extra="1";')},
            "sasl.jaas.config",
            "with just username and password",
        ),
        (
            {"ssl.truststore.location": "/etc/ts.jks"},
            "ssl.truststore.location",
            "keytool -exportcert",
        ),
        (
            {"ssl.truststore.password": "changeit"},
            "ssl.truststore.password",
            "kafka.ssl.ca.location",
        ),
        ({"ssl.keystore.type": "JKS"}, "ssl.keystore.type", "keytool -importkeystore"),
        ({"buffer.memory": "32MB"}, "buffer.memory", "whole number of bytes"),
        (
            {"max.request.size": "2097152", "message.max.bytes": "1000000"},
            "max.request.size",
            "kafka.message.max.bytes, which is set too",
        ),
    ],
)
def test_java_keys_without_an_equivalent_are_refused_alike_with_the_key_to_use(
    java: dict[str, str], key: str, fix: str
) -> None:
    sink_fix, source_fix = both_errors(**java)
    assert sink_fix == source_fix
    assert fix in sink_fix
    with pytest.raises(SinkOptionError) as caught:
        SinkOptions.parse({**SINK_BASE, **{f"kafka.{k}": v for k, v in java.items()}})
    assert caught.value.option == f"kafka.{key}"


def test_a_refused_secret_is_never_echoed() -> None:
    with pytest.raises(SinkOptionError) as caught:
        SinkOptions.parse({**SINK_BASE, "kafka.sasl.jaas.config": PLAIN})
    assert "alice" not in str(caught.value) and "pa ss" not in str(caught.value)
    assert "kafka.sasl.jaas.config='***'" in str(caught.value)


def test_the_sink_refuses_what_spark_refuses_and_what_it_owns() -> None:
    for key in ("transactional.id", "key.serializer", "value.serializer"):
        assert SINK.refusal(key) is not None
    assert SOURCE.refusal("key.deserializer") is not None


def test_ill_typed_values_fail_at_parsing_naming_key_value_and_fix() -> None:
    with pytest.raises(SinkOptionError) as caught:
        sink_config(**{"transaction.timeout.ms": "abc"})
    message = str(caught.value)
    assert caught.value.code == "KAFKA_EOS.SINK.INVALID_OPTION"
    assert "kafka.transaction.timeout.ms='abc'" in message
    assert "expected a number, in the property's unit" in message
    with pytest.raises(SourceOptionError) as source:
        SourceOptions.parse(
            {**SOURCE_BASE, "kafka.enable.auto.commit.interval": "x"}, streaming=True
        )
    assert "librdkafka has no property" in str(source.value)
    with pytest.raises(SourceOptionError) as flag:
        SourceOptions.parse({**SOURCE_BASE, "kafka.check.crcs": "maybe"}, streaming=True)
    assert "kafka.check.crcs='maybe'" in str(flag.value) and "true or false" in str(flag.value)


def test_a_translated_value_librdkafka_refuses_names_the_key_as_written() -> None:
    with pytest.raises(SinkOptionError) as caught:
        sink_config(**{"max.request.size": "2MB"})
    assert caught.value.option == "kafka.max.request.size"
    assert "message.max.bytes" in caught.value.fix


def test_a_combination_librdkafka_refuses_blames_no_single_key() -> None:
    with pytest.raises(SinkOptionError) as caught:
        sink_config(**{"ssl.keystore.location": "/k.p12"})
    assert "ssl.keystore.password` is mandatory" in caught.value.fix
    with pytest.raises(SinkOptionError) as both:
        sink_config(**{"ssl.keystore.location": "/k.p12", "linger.ms": "soon"})
    assert both.value.option == "kafka.linger.ms"


def test_the_check_leaves_no_thread_behind() -> None:
    """librdkafka's threads are joined when the throwaway client closes. Only its threads
    (named ``rdk:...``) are counted, since another test's threads in this worker may start or
    end meanwhile (the whole count once failed by one under load), and a client's last
    thread may take a moment to go: 20 clients' leaked threads would not."""
    gc.collect()  # clients that earlier tests dropped end their threads first
    before = _librdkafka_threads()
    for _ in range(20):
        sink_config(**{"linger.ms": "5"})
    deadline = time.monotonic() + 5
    while _librdkafka_threads() > before and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.05)
    assert _librdkafka_threads() <= before


def _librdkafka_threads() -> int:
    tasks = Path(f"/proc/{os.getpid()}/task")
    names = []
    for task in tasks.iterdir():
        try:
            names.append((task / "comm").read_text())
        except FileNotFoundError:  # ended meanwhile
            continue
    return sum(name.startswith("rdk:") for name in names)


def test_docs_show_the_table_the_code_enforces() -> None:
    text = (ROOT / "docs" / "options.md").read_text()
    shown = re.search(r"<!-- java-keys -->\n(.*?)\n<!-- /java-keys -->", text, re.S)
    assert shown is not None and shown.group(1) == java_keys_table()
    assert len(java_keys_table().splitlines()) == len(JAVA_KEYS) + 2


def test_key_refused_carries_key_value_and_fix() -> None:
    with pytest.raises(KeyRefused) as caught:
        SINK.client_config({"max.block.ms": "1"})
    assert (caught.value.key, caught.value.value) == ("max.block.ms", "1")
