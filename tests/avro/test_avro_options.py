"""Which columns are Avro, with which schema: the options the source and the sink share."""

from __future__ import annotations

import json
import logging

import pytest
from avro_samples import EVERY_TYPE

from connectors.avro.options import Side, avro_columns
from connectors.kafka.sink.errors import SinkOptionError
from connectors.kafka.sink.options import SinkOptions
from connectors.kafka.source.errors import SourceOptionError
from connectors.kafka.source.options import SourceOptions, parse_avro
from connectors.options import OptionReader

SCHEMA = json.dumps(EVERY_TYPE)
SOURCE = {"kafka.bootstrap.servers": "k:9092", "subscribe": "orders"}
SINK = {"kafka.bootstrap.servers": "k:9092", "deliveryGuarantee": "at_least_once"}


def columns(source: bool = True, **options: str):
    error = SourceOptionError if source else SinkOptionError
    return avro_columns(OptionReader.of(options, error), error, source=source)


def test_binary_is_the_default_and_reads_no_schema() -> None:
    assert columns() == ()
    assert SourceOptions.parse(SOURCE, streaming=True).avro is None


def test_a_value_schema_as_text_or_file(tmp_path) -> None:
    path = tmp_path / "order.avsc"
    path.write_text(SCHEMA)
    by_text = columns(valueFormat="AVRO", valueSchema=SCHEMA)
    by_file = columns(valueFormat="avro", valueSchemaFile=str(path))
    assert [c.side for c in by_text] == [Side.VALUE]
    assert by_text[0].schema == by_file[0].schema
    assert (by_text[0].column, by_text[0].corrupt_column) == ("value", "_corrupt_value")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"valueFormat": "avro"}, "valueFormat='avro' is not valid: it needs valueSchema"),
        ({"valueFormat": "json"}, "expected one of binary, avro"),
        ({"valueSchema": SCHEMA}, "set valueFormat=avro to use it"),
        (
            {"valueFormat": "avro", "valueSchema": SCHEMA, "valueSchemaFile": "/x.avsc"},
            "give valueSchema or valueSchemaFile, not both",
        ),
        ({"keyFormat": "avro", "keySchema": "{not json"}, "keySchema='...' is not valid"),
        ({"keyFormat": "avro", "keySchemaFile": "/no/such.avsc"}, "cannot read the Avro schema"),
        (
            {"valueFormat": "avro", "schema.registry.basic.auth.user.info": "u:p"},
            "schema.registry.url=None is not valid: the options",
        ),
        (
            {
                "valueFormat": "avro",
                "schema.registry.url": "http://r:8081",
                "valueWriterSchema": SCHEMA,
            },
            "each value names its writer schema",
        ),
    ],
)
def test_option_errors_name_the_option_and_the_fix(options: dict[str, str], message: str) -> None:
    with pytest.raises(SourceOptionError, match="kafka-eos source option") as caught:
        columns(**options)
    assert message in str(caught.value)


def test_the_sink_writes_with_its_schema_only() -> None:
    with pytest.raises(SinkOptionError, match="the sink writes with valueSchema"):
        columns(False, valueFormat="avro", valueSchema=SCHEMA, valueWriterSchema=SCHEMA)


def test_the_sink_needs_a_topic_for_the_registry_subject() -> None:
    options = {**SINK, "valueFormat": "avro", "schema.registry.url": "http://r:8081"}
    with pytest.raises(SinkOptionError, match="TopicNameStrategy"):
        SinkOptions.parse(options)
    sink = SinkOptions.parse({**options, "topic": "orders"})
    assert [c.column for c in sink.avro] == ["value"]


def test_a_subject_schema_needs_exactly_one_topic() -> None:
    avro = parse_avro(
        {"subscribePattern": "orders-.*", "valueFormat": "avro", "schema.registry.url": "http://r"}
    )
    assert avro is not None and avro.topic is None
    with pytest.raises(SourceOptionError, match="set valueSchema or valueSchemaFile"):
        avro.columns[0].resolved(avro.topic, SourceOptionError)
    one = parse_avro({"assign": '{"orders":[0,1]}', "keyFormat": "avro", "keySchema": SCHEMA})
    assert one is not None and one.topic == "orders" and not one.permissive


def test_mode_and_avro_options_are_known_to_the_source(caplog) -> None:
    options = {
        **SOURCE,
        "valueFormat": "avro",
        "valueSchema": SCHEMA,
        "mode": "PERMISSIVE",
        "schema.registry.url": "http://r:8081",
        "schema.registry.basic.auth.user.info": "u:p",
    }
    with caplog.at_level(logging.WARNING):
        parsed = SourceOptions.parse(options, streaming=True)
    assert parsed.avro is not None and parsed.avro.permissive
    assert "unknown option" not in caplog.text
