"""A Confluent schema registry, as the Avro codec needs it: writer schemas by id, the latest
schema of a subject, and the id of a schema under a subject (registered if absent).

Created on the driver and shipped to executors: it holds only its client config, and opens
its ``SchemaRegistryClient`` at the first call in each process (a client holds an HTTP pool,
which does not pickle).

The config may carry credentials (``basic.auth.user.info``, a URL with ``user:password@``):
errors show the URL without them and replace any secret in a client's message by ``***``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar
from urllib.parse import unquote, urlsplit

from checkpoint.errors import KafkaEosError
from connectors.avro.schema import AvroSchemaError, Schema, parse, plain
from connectors.redact import is_secret_key, scrub

if TYPE_CHECKING:  # the client pulls in an HTTP stack: imported at first use, in _client()
    from confluent_kafka.schema_registry import Schema as RegistrySchema
    from confluent_kafka.schema_registry import SchemaRegistryClient

_PREFIX = "schema.registry."
# The client's numeric settings, which it takes only as numbers (Spark options are strings).
_NUMBERS = ("timeout", "cache.capacity", "cache.latest.ttl.sec", "max.retries")
_NUMBERS += ("retries.wait.ms", "retries.max.wait.ms")
NOT_FOUND = 404
SCHEMA_NOT_FOUND = 40403  # Confluent's API: the registry answered that the schema is not there
_T = TypeVar("_T")


class RegistryError(KafkaEosError):
    """A schema registry call failed: unreachable, refused, or no such schema or subject."""

    code = "KAFKA_EOS.AVRO.REGISTRY_FAILED"

    def __init__(
        self,
        url: str,
        what: str,
        detail: str,
        status: int | None = None,
        registry_code: int | None = None,
    ) -> None:
        self.url = url  # without credentials
        self.what = what
        self.detail = detail
        self.status = status  # the HTTP status the registry answered, if it answered
        # The registry's own error code (40403: no such schema); a 404 without it is a wrong
        # URL or a proxy, not an answer about the schema.
        self.registry_code = registry_code
        super().__init__(f"schema registry {url}, {what}: {detail}")

    @property
    def schema_not_found(self) -> bool:
        return self.registry_code == SCHEMA_NOT_FOUND


class Registered(NamedTuple):
    schema_id: int
    schema: Schema


def subject_for(topic: str, is_key: bool) -> str:
    """The subject of a topic's keys or values under Confluent's TopicNameStrategy."""
    return f"{topic}-key" if is_key else f"{topic}-value"


def client_config(options: Mapping[str, object]) -> dict[str, object]:
    """``SchemaRegistryClient``'s config from the user's options: ``schema.registry.url``
    becomes ``url``; keys without the prefix (``basic.auth.user.info``) pass as they are, and
    numeric settings (``max.retries``, ``timeout``) given as text become numbers."""
    config = {k.removeprefix(_PREFIX): v for k, v in options.items()}
    for key in _NUMBERS:
        if isinstance(config.get(key), str):
            config[key] = _number(key, str(config[key]))
    if not config.get("url"):
        raise RegistryError(
            "(not opened)",
            "configuration",
            f"no URL among the options {sorted(options)}: set schema.registry.url, e.g. "
            "http://registry:8081",
        )
    return config


def _number(key: str, text: str) -> int | float:
    try:
        number = float(text)
    except ValueError:
        raise RegistryError(
            "(not opened)", "configuration", f"{key}={text!r} is not a number, e.g. 3"
        ) from None
    return int(number) if number.is_integer() else number


class SchemaRegistry:
    """A schema registry client that pickles as its config (see the module docstring)."""

    def __init__(self, options: Mapping[str, object]) -> None:
        self._config = client_config(options)
        self._client: SchemaRegistryClient | None = None
        self._by_id: dict[int, Schema] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {"_config": self._config}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["_config"])  # type: ignore[misc]

    @property
    def url(self) -> str:
        """The registry's URL(s) without credentials, for messages."""
        return ",".join(_without_userinfo(u) for u in self._urls())

    def writer_schema(self, schema_id: int) -> Schema:
        """The schema with registry id ``schema_id``, fetched and parsed once per process."""
        schema = self._by_id.get(schema_id)
        if schema is None:
            found = self._call(f"schema id {schema_id}", lambda c: c.get_schema(schema_id))
            schema = self._by_id[schema_id] = self._parse(found, f"schema id {schema_id}")
        return schema

    def latest(self, subject: str) -> Registered:
        """The latest version of ``subject``: its id and schema."""
        found = self._call(f"subject {subject}", lambda c: c.get_latest_version(subject))
        schema = self._parse(found.schema, f"the latest schema of subject {subject}")
        return Registered(found.schema_id, schema)

    def register(self, subject: str, schema: Schema) -> int:
        """The id of ``schema`` under ``subject``: looked up, and registered only if absent
        (registering needs write access, and may be refused by the subject's compatibility)."""
        from confluent_kafka.schema_registry import Schema as RegistrySchema

        text = RegistrySchema(json.dumps(plain(schema)), "AVRO")
        what = f"subject {subject}"
        try:
            return self._call(what, lambda c: c.lookup_schema(subject, text)).schema_id
        except RegistryError as exc:
            if exc.status != NOT_FOUND:
                raise
        return self._call(what, lambda c: c.register_schema(subject, text))

    def _call(self, what: str, call: Callable[[SchemaRegistryClient], _T]) -> _T:
        from confluent_kafka.schema_registry import SchemaRegistryClient
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        try:
            if self._client is None:
                self._client = SchemaRegistryClient(self._config)
            return call(self._client)
        except Exception as exc:  # the client's errors: HTTP, connection, config
            answered = isinstance(exc, SchemaRegistryError)
            status = exc.http_status_code if answered else None
            registry_code = exc.error_code if answered else None
            detail = (
                f"{type(exc).__name__}: {self._scrub(str(exc))}. Check the URL, the credentials "
                "(basic.auth.user.info), and that the subject or id exists"
            )
            # from None: the client's own exception may carry a secret in its text.
            raise RegistryError(self.url, what, detail, status, registry_code) from None

    def _parse(self, found: RegistrySchema, what: str) -> Schema:
        kind = found.schema_type or "AVRO"
        if kind != "AVRO" or found.references:
            detail = f"a {kind} schema" if kind != "AVRO" else "an Avro schema with references"
            raise RegistryError(
                self.url,
                what,
                f"it is {detail}: kafka-eos reads Avro schemas without references. Give the "
                "Avro schema as an option instead",
            )
        try:
            return parse(json.loads(found.schema_str), what)
        except (json.JSONDecodeError, AvroSchemaError) as exc:
            raise RegistryError(self.url, what, str(exc)) from exc

    def _urls(self) -> list[str]:
        return str(self._config["url"]).split(",")

    def _scrub(self, text: str) -> str:
        # basic.auth.user.info is "user:password": a secret the shared key pattern does not name.
        secrets = [
            str(v) for k, v in self._config.items() if is_secret_key(k) or k.endswith("user.info")
        ]
        for url in self._urls():
            userinfo = urlsplit(url.strip()).netloc.rpartition("@")[0]
            secrets += [userinfo, unquote(userinfo)] if userinfo else []
        return scrub(text, filter(None, secrets))


def _without_userinfo(url: str) -> str:
    parts = urlsplit(url.strip())
    if "@" not in parts.netloc:
        return url.strip()
    return parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2]).geturl()
