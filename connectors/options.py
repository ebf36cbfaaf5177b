"""One grammar for every option the project reads: the source's and the sink's Spark options,
and the linter's pipeline files and flags.

Each parser takes the option's documented name (it names the option in errors) and the raw
text, and raises :class:`OptionError` with the value seen and the fix. Durations mean the same
everywhere:

>>> duration_ms("maxTriggerDelay", "15m"), duration_ms("x", "1h30m"), duration_ms("x", "1.5s")
(900000, 5400000, 1500)
>>> duration_ms("x", "250"), duration_ms("x", "2 min"), duration_ms("x", "1500us")
(250, 120000, 2)
>>> positive_int("maxOffsetsPerTrigger", "0")
Traceback (most recent call last):
...
connectors.options.OptionError: [KAFKA_EOS.OPTION.INVALID] kafka-eos option \
maxOffsetsPerTrigger='0' is not valid: expected a positive whole number, e.g. 100000
"""

from __future__ import annotations

import difflib
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import ClassVar

from checkpoint.errors import ConfigError
from connectors.redact import REDACTED, is_secret_key

# ASCII digits only: str.isdigit() also takes '²', which int() then refuses.
_DIGITS = re.compile(r"[0-9]+")
# One part of a duration: a number, then a unit. Parts concatenate: 1h30m.
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(us|ms|min|s|m|h|d)")
_UNIT_MS = {
    "us": 1e-3,
    "ms": 1,
    "s": 1_000,
    "m": 60_000,
    "min": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
}
DURATION_GRAMMAR = (
    "a number and a unit (us, ms, s, m or min, h, d), parts concatenated (1h30m), "
    "decimals allowed (1.5s); a bare whole number is milliseconds"
)


class OptionError(ConfigError):
    """An option is missing, malformed or contradicts another one.

    Subclasses only say whose option it is (``side``), because the error surfaces in a Spark
    log far from the ``.option(...)`` call that caused it.
    """

    code = "KAFKA_EOS.OPTION.INVALID"
    side: ClassVar[str] = ""

    def __init__(self, option: str, value: object, fix: str) -> None:
        self.option = option
        self.value = REDACTED if value is not None and is_secret_key(option) else value
        self.fix = fix
        owner = f"kafka-eos {self.side} option" if self.side else "kafka-eos option"
        # A secret (kafka.sasl.jaas.config, a password) is never shown: Spark logs the error.
        super().__init__(f"{owner} {option}={self.value!r} is not valid: {fix}")


def duration_ms(option: str, text: str | int, *, error: type[OptionError] = OptionError) -> int:
    """Milliseconds from ``30s``, ``15m``, ``1h30m``, ``1.5s``, ``500us`` or plain ``60000``,
    rounded to a whole millisecond (Spark's time strings accept ``us`` too)."""
    raw = "".join(str(text).split()).lower()
    if is_digits(raw):
        return int(raw)
    parts = _DURATION_PART.findall(raw)
    if not parts or "".join(n + u for n, u in parts) != raw:
        raise error(
            option,
            text,
            f"expected a duration such as 500ms, 30s, 15m or 1h30m: {DURATION_GRAMMAR}",
        )
    return round(sum(float(n) * _UNIT_MS[u] for n, u in parts))


def format_duration(ms: int) -> str:
    """Short human form of ``ms`` (``6m10s``, ``1h``, ``250ms``), in the grammar above."""
    if ms < 1_000:
        return f"{ms}ms"
    out, rest = "", ms
    for unit in ("d", "h", "m", "s"):
        count, rest = divmod(rest, int(_UNIT_MS[unit]))
        out += f"{count}{unit}" if count else ""
    return out + (f"{rest}ms" if rest else "")


def near_miss(text: str, words: Iterable[str]) -> str | None:
    """The one of ``words`` that ``text`` most likely misspells (case-insensitive), if any:
    the "did you mean" of an unknown option or keyword."""
    by_lower = {word.lower(): word for word in words}
    close = difflib.get_close_matches(text.strip().lower(), by_lower, n=1, cutoff=0.8)
    return by_lower[close[0]] if close else None


def is_digits(text: str) -> bool:
    """Whether ``text`` is ASCII digits only, which ``int()`` always reads."""
    return _DIGITS.fullmatch(text) is not None


def positive_int(
    option: str, text: str, *, example: str = "100000", error: type[OptionError] = OptionError
) -> int:
    """A whole number above zero, written in digits."""
    if not is_digits(text.strip()) or int(text) <= 0:
        raise error(option, text, f"expected a positive whole number, e.g. {example}")
    return int(text)


def boolean(option: str, text: str, *, error: type[OptionError] = OptionError) -> bool:
    """``true`` or ``false``, in any case."""
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise error(option, text, "expected true or false")
    return value == "true"


def choice(
    option: str, text: str, choices: Iterable[str], *, error: type[OptionError] = OptionError
) -> str:
    """One of ``choices``, in any case; returned lower-cased."""
    allowed = tuple(choices)
    value = text.strip().lower()
    if value not in allowed:
        raise error(option, text, f"expected one of {', '.join(allowed)}")
    return value


# (side, option) pairs already warned about in this process.
_WARNED: set[tuple[str, str]] = set()


@dataclass(frozen=True)
class OptionReader:
    """Spark's options, read case-insensitively (Spark hands them over lower-cased) with the
    parsers above; ``error`` is the side's :class:`OptionError`. Names are given as documented,
    so errors name them as the user wrote them in the docs."""

    options: Mapping[str, str]
    error: type[OptionError] = OptionError

    @classmethod
    def of(cls, options: Mapping[str, str], error: type[OptionError] = OptionError) -> OptionReader:
        return cls({key.lower(): value for key, value in options.items()}, error)

    def get(self, name: str) -> str | None:
        return self.options.get(name.lower())

    def check_names(
        self,
        ours: Iterable[str],
        *,
        tolerated: Iterable[str] = (),
        prefixes: tuple[str, ...] = ("kafka.", "schema.registry."),
        log: logging.Logger,
    ) -> None:
        """Options that are neither ``ours`` nor under ``prefixes``: a near miss of one of ours
        fails with "did you mean"; one Spark's ``kafka`` format accepts on this side and
        ignores (``tolerated``) is accepted as Spark accepts it; any other is warned about
        once per process (this runs where the query is planned: the driver)."""
        side = self.error.side
        known = {name.lower() for name in ours}
        quiet = {name.lower() for name in tolerated}
        for key in sorted(self.options):
            if key in known or key.startswith(prefixes):
                continue
            if key in quiet:
                log.debug(
                    "kafka-eos %s: option %r is ignored, as Spark's kafka format does", side, key
                )
                continue
            guess = near_miss(key, ours)
            if guess is not None:
                raise self.error(key, self.options[key], f"unknown option: did you mean {guess}?")
            if (side, key) not in _WARNED:
                _WARNED.add((side, key))
                log.warning("kafka-eos %s: unknown option %r is ignored", side, key)

    def __contains__(self, name: str) -> bool:
        return name.lower() in self.options

    def required(self, name: str, example: str) -> str:
        value = (self.get(name) or "").strip()
        if not value:
            raise self.error(name, self.get(name), f"it is required, e.g. {example}")
        return value

    def positive_int(self, name: str, *, example: str = "100000") -> int | None:
        """``None`` when the option is not set."""
        value = self.get(name)
        return (
            None if value is None else positive_int(name, value, example=example, error=self.error)
        )

    def boolean(self, name: str, default: bool) -> bool:
        value = self.get(name)
        return default if value is None else boolean(name, value, error=self.error)

    def choice(self, name: str, choices: Iterable[str]) -> str:
        """The first choice is the default."""
        allowed = tuple(choices)
        value = self.get(name)
        return choice(name, allowed[0] if value is None else value, allowed, error=self.error)

    def duration_ms(self, name: str, default: str) -> int:
        value = self.get(name)
        return duration_ms(name, default if value is None else value, error=self.error)
