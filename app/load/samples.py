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
from collections.abc import Callable
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


def _sample(raw: str, value_of: Callable[[str], float | None]) -> Sample | None:
    """``value,timestamp`` read as a Sample, the value by ``value_of`` (None: not one)."""
    value_text, separator, time_text = raw.partition(",")
    if not separator:
        return None
    timestamp_s = _timestamp_s(time_text)
    if timestamp_s is None:
        return None
    value = value_of(value_text.strip())
    return None if value is None else Sample(value, timestamp_s)


def _usage_fraction(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if 0.0 <= value <= 1.0 else None  # also false for NaN


def _hot_value(text: str) -> float | None:
    try:
        value = int(text)
    except ValueError:
        return None
    return float(value) if value >= 0 else None


def parse_usage(raw: str) -> Sample | None:
    """A usage fraction in [0, 1] with its timestamp; None for anything else.

    Values outside [0, 1] are not clamped: the annotator never writes them, so they
    come from a foreign or broken writer (a percentage written by mistake would
    otherwise reject every node). NaN and infinities are outside [0, 1] too.
    """
    return _sample(raw, _usage_fraction)


def parse_hot_value(raw: str) -> Sample | None:
    """A non-negative whole hot value with its timestamp; None for anything else."""
    return _sample(raw, _hot_value)


# Every node synced in one pass is stamped with the same instant: format it once.
@functools.lru_cache(maxsize=1024)
def format_timestamp(at_s: float) -> str:
    return datetime.fromtimestamp(at_s, tz=UTC).strftime(_UTC_LAYOUT)


def format_usage(usage_fraction: float, at_s: float) -> str:
    """The annotation value for a usage fraction, e.g. ``0.63012,2023-10-17T15:04:32Z``."""
    return f"{usage_fraction:.5f},{format_timestamp(at_s)}"


def format_hot_value(hot_value: int, at_s: float) -> str:
    return f"{hot_value},{format_timestamp(at_s)}"
