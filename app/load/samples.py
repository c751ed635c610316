"""The annotation wire format: ``"<value>,<timestamp>"`` on a Node.

loadaware writes crane's exact layout (five decimals, ``YYYY-MM-DDTHH:MM:SSZ``) so
that a crane scheduler still running during a migration reads it, but always in
real UTC. Reading accepts that layout and any RFC 3339 timestamp.

crane writes local time followed by a literal ``Z``. Such values are read as UTC:
correct when crane ran in UTC (the container default). Otherwise they look stale
(zones west of UTC, ignored as missing data) or lie in the future (zones east,
rejected by the clock-skew guard in the load model), and the annotator replaces
them at its first sync. No wrong value is ever used as fresh.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import UTC, datetime

__all__ = ["HOT_VALUE_KEY", "Sample", "format_hot_value", "format_usage", "parse_hot_value"]

HOT_VALUE_KEY = "node_hot_value"

_UTC_LAYOUT = "%Y-%m-%dT%H:%M:%SZ"


@dataclass(frozen=True, slots=True)
class Sample:
    """One annotation value with the UTC time it was measured, in unix seconds."""

    value: float
    timestamp_s: float


def parse_timestamp_s(text: str) -> float | None:
    """Parse an RFC 3339 / crane timestamp into unix seconds, or None if it is not one."""
    text = text.strip()
    try:  # Python 3.11 reads crane's "...Z" layout too, far faster than strptime
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        # Without a zone the instant is unknowable; crane always writes one.
        return None
    return parsed.timestamp()


# Every node synced in one pass carries the same timestamp: parse each text once. Only
# texts a timestamp can be are kept (RFC 3339 with nanoseconds and an offset is 35
# characters), so a hostile annotation can cost a parse, never memory.
_CACHED_TIMESTAMP_CHARS = 40
_timestamp_s_cached = functools.lru_cache(maxsize=256)(parse_timestamp_s)


def _timestamp_s(time_text: str) -> float | None:
    if len(time_text) <= _CACHED_TIMESTAMP_CHARS:
        return _timestamp_s_cached(time_text)
    return parse_timestamp_s(time_text)


def _split(raw: str) -> tuple[str, float] | None:
    value_text, separator, time_text = raw.partition(",")
    if not separator:
        return None
    timestamp_s = _timestamp_s(time_text)
    if timestamp_s is None:
        return None
    return value_text.strip(), timestamp_s


def parse_usage(raw: str) -> Sample | None:
    """A usage fraction in [0, 1] with its timestamp; None for anything else.

    Values outside [0, 1] are not clamped: the annotator never writes them, so they
    come from a foreign or broken writer (a percentage written by mistake would
    otherwise reject every node). NaN and infinities are outside [0, 1] too.
    """
    parts = _split(raw)
    if parts is None:
        return None
    value_text, timestamp_s = parts
    try:
        value = float(value_text)
    except ValueError:
        return None
    if not 0.0 <= value <= 1.0:  # also false for NaN
        return None
    return Sample(value, timestamp_s)


def parse_hot_value(raw: str) -> Sample | None:
    """A non-negative whole hot value with its timestamp; None for anything else."""
    parts = _split(raw)
    if parts is None:
        return None
    value_text, timestamp_s = parts
    try:
        value = int(value_text)
    except ValueError:
        return None
    if value < 0:
        return None
    return Sample(float(value), timestamp_s)


# Every node synced in one pass is stamped with the same instant: format it once.
@functools.lru_cache(maxsize=1024)
def format_timestamp(at_s: float) -> str:
    return datetime.fromtimestamp(at_s, tz=UTC).strftime(_UTC_LAYOUT)


def format_usage(usage_fraction: float, at_s: float) -> str:
    """The annotation value for a usage fraction, e.g. ``0.63012,2023-10-17T15:04:32Z``."""
    return f"{usage_fraction:.5f},{format_timestamp(at_s)}"


def format_hot_value(hot_value: int, at_s: float) -> str:
    return f"{hot_value},{format_timestamp(at_s)}"
