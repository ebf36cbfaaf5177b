"""A real schema registry for the tests: Apicurio Registry, a local JVM process.

``integration_tests/conftest.py`` makes :func:`schema_registry` available to every test with
this import, beside that of ``integration_tests.kafka_fixtures``::

    from integration_tests.registry_fixtures import schema_registry  # noqa: F401
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafka_eos.cluster.registry import SchemaRegistry


@pytest.fixture(scope="session")
def schema_registry() -> Iterator[SchemaRegistry]:
    """One empty registry for the whole session, stopped by pid at the end; its
    Confluent-compatible API is at ``schema_registry.url``. Tests share it: use subjects of
    their own (unique names)."""
    with SchemaRegistry() as registry:
        yield registry
