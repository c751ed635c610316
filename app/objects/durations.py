"""Durations in Go's syntax (``90s``, ``3m``, ``1h30m``), as crane's files and the
Kubernetes tools write them, to and from seconds."""

from __future__ import annotations

import math
import re

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
