"""Durations in Go's syntax (``90s``, ``3m``, ``1h30m``), as crane's files and the
Kubernetes tools write them, to and from seconds."""

from __future__ import annotations

import math
import re

__all__ = [
    "MAX_DURATION_S",
    "MIN_DURATION_S",
    "at_least",
    "duration_range_problem",
    "format_duration",
    "parse_duration_s",
]

# One range for every duration, on the command line and in files (policies, the
# descheduler's configuration): 1 ms to 720 h (30 days). 0 is allowed only where a
# field says it means "off". A shorter one is a typo (``1ns``) that turns a loop into a
# busy loop; a longer one is no setting anybody means.
MIN_DURATION_S = 0.001
MAX_DURATION_S = 720 * 3600.0

_GO_DURATION_UNITS_S = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_GO_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration_s(text: str) -> float:
    """Parse a Go duration string (``3m``, ``1h30m``, ``90s``) into seconds."""
    raw = text.strip()
    body = raw[1:] if raw[:1] in "+-" else raw
    if raw.startswith("-"):
        raise ValueError(f"duration {text!r} is negative")
    if body == "0":
        return 0.0
    total = 0.0
    position = 0
    while position < len(body):
        match = _GO_DURATION_PART.match(body, position)
        if match is None:
            raise ValueError(
                f"invalid duration {text!r}: use Go syntax such as '90s', '3m' or '1h30m'"
            )
        total += float(match.group(1)) * _GO_DURATION_UNITS_S[match.group(2)]
        position = match.end()
    if not body:
        raise ValueError("duration is empty: use Go syntax such as '90s', '3m' or '1h30m'")
    if not math.isfinite(total):
        raise ValueError(f"duration {text!r} is too large to represent")
    return total


def duration_range_problem(seconds: float, written: str) -> str | None:
    """Why a duration (other than 0) is outside the one range, or None when it is in it;
    ``written`` is the duration as the input wrote it."""
    if seconds == 0 or MIN_DURATION_S <= seconds <= MAX_DURATION_S:
        return None
    if seconds < MIN_DURATION_S:
        return f"duration {written!r} is shorter than the minimum 1ms"
    return f"duration {written!r} is longer than the maximum 720h"


def at_least(seconds: float, minimum_s: float, name: str, because: str) -> float:
    """``seconds``, or ValueError where a loop's period ``name`` is shorter than its
    ``minimum_s``, saying ``because`` (what each turn of the loop costs)."""
    if seconds < minimum_s:
        raise ValueError(
            f"{name} {format_duration(seconds)} is shorter than the minimum "
            f"{format_duration(minimum_s)}: {because}"
        )
    return seconds


def format_duration(seconds: float) -> str:
    """Render seconds the way Go prints a duration, for messages and ``policy check``."""
    if seconds == 0:
        return "0s"
    whole = int(seconds)
    if whole != seconds:
        return f"{seconds:g}s"
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    parts = []
    if hours:
        parts.append(f"{hours}h")
    if minutes:
        parts.append(f"{minutes}m")
    if secs or not parts:
        parts.append(f"{secs}s")
    return "".join(parts)
