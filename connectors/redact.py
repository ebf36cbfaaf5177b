"""Keeps secrets out of every output: findings, rendered reports and error messages.

A linter reads files full of credentials (``sasl.jaas.config``, keystore passwords), and a
client's errors may quote its config (a schema registry's URL with a password in it);
printing one into a CI or Spark log leaks it, so redaction happens where values leave.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

REDACTED = "***"

# Any key naming credential material: passwords, secrets, private keys, JAAS configs, tokens.
_SECRET_KEY = re.compile(
    r"pass(word|wd|phrase)|secret|credential|token|jaas|private|"
    r"(^|[._])key\.pem|(^|[._])key($|[._](location|pem|password))|keystore\.(key|certificate)",
    re.IGNORECASE,
)


def is_secret_key(key: str) -> bool:
    """True for keys whose values must never be shown (``sasl.password``, ``ssl.key.pem``...)."""
    return bool(_SECRET_KEY.search(key))


def redact_value(key: str, value: str) -> str:
    """The value to show for ``key``: itself, or ``***`` when the key holds a secret."""
    return REDACTED if is_secret_key(key) else value


def secret_values(configs: Iterable[Mapping[str, str]]) -> set[str]:
    """Every non-empty secret value in ``configs``, to scrub from free text such as errors."""
    return {v for config in configs for k, v in config.items() if v and is_secret_key(k)}


def scrub(text: str, secrets: Iterable[str]) -> str:
    """Replace every occurrence of a secret value in ``text``, longest first."""
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text
