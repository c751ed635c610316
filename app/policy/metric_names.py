"""The usage metrics loadaware knows by name: what each one measures, and over what.

crane's names say how they are made: ``cpu_usage_avg_5m`` is the mean CPU usage over
5 minutes, ``cpu_usage_max_avg_1h`` the highest of those 5-minute means in the last
hour. loadaware adds percentiles in the same style: ``cpu_usage_p95_avg_1h`` is the
95th percentile of the 5-minute means in the last hour (``deploy/prometheus`` records
p90 and p95 over 1h and 1d for cpu and mem; a rule of your own may record any other).

A policy may still name any Prometheus metric (the annotator syncs whatever it names);
this grammar only tells the simulator how to compute a name, and lets the policy refuse
a name that is meant as a percentile but is written wrong (``cpu_usage_p95_1h``,
``cpu_usage_p100_avg_1h``): such a name would otherwise load, find no series, and be
missing data for ever.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

__all__ = [
    "AVG_WINDOW_S",
    "CLASS_NAME",
    "CLASS_USAGE_METRICS",
    "MAX_WINDOW_S",
    "MIN_WINDOW_S",
    "UsageMetric",
    "class_unsampled_key",
    "percentile_problem",
    "shipped_percentile_metrics",
    "split_class_metric",
    "usage_metric",
    "window_text",
]

AVG_WINDOW_S = 5 * 60.0  # the window of the ``*_avg_5m`` mean that the others aggregate
MIN_WINDOW_S = 10 * 60.0  # a window holding at least two disjoint 5-minute means
MAX_WINDOW_S = 7 * 86400.0
_UNIT_S = {"m": 60.0, "h": 3600.0, "d": 86400.0}

# A percentile over a window longer than this takes the 5-minute means every
# SUBQUERY_STEP_S (a subquery, ``[1d:5m]``), as the shipped _1d rules do: the window's
# disjoint 5-minute means, at a quarter of the cost of every 30s one; a shorter window
# takes every sample of the 5-minute rule (``[1h]``: 120 of them).
EVERY_SAMPLE_UP_TO_S = 3600.0
SUBQUERY_STEP_S = 5 * 60.0

# The percentiles the shipped rules record (deploy/prometheus/loadaware-rules.yaml).
SHIPPED_PERCENTILES = (90, 95)
SHIPPED_WINDOWS = ("1h", "1d")
RESOURCES = ("cpu", "mem")

_WINDOW = r"([1-9][0-9]*)([mhd])"
_NAME = re.compile(rf"(cpu|mem)_usage_(?:(avg_5m)|max_avg_{_WINDOW}|p([0-9]+)_avg_{_WINDOW})")
# A name meant as a percentile: ``<something>_usage_`` and a word ``p<digits>`` after it.
_LOOKS_LIKE_PERCENTILE = re.compile(r"_usage_(?:.*_)?p[0-9]+(?:_|$)")
EXAMPLE = "cpu_usage_p95_avg_1h"


@dataclass(frozen=True, slots=True)
class UsageMetric:
    """What a usage metric's name says it is."""

    resource: str  # "cpu" or "mem"
    aggregation: str  # "avg" (the 5-minute mean itself), "max" or "quantile"
    window_s: float | None = None  # None for the 5-minute mean
    quantile: float | None = None  # 0.95 for p95; only for "quantile"

    @property
    def step_s(self) -> float | None:
        """How far apart the 5-minute means a percentile takes lie (None: every sample
        of the rule; ``EVERY_SAMPLE_UP_TO_S``)."""
        if self.quantile is None or (self.window_s or 0.0) <= EVERY_SAMPLE_UP_TO_S:
            return None
        return SUBQUERY_STEP_S

    def text(self) -> str:
        """What it is, in words: "95th percentile of the 5-minute means of CPU usage in
        the last 1h"."""
        resource = "CPU" if self.resource == "cpu" else "memory"
        window = window_text(self.window_s or 0.0)
        if self.aggregation == "avg":
            return f"mean {resource} usage over the last 5 minutes"
        if self.aggregation == "max":
            return f"highest 5-minute mean of {resource} usage in the last {window}"
        percent = round(100 * (self.quantile or 0.0))
        every = f", one every {window_text(self.step_s)}" if self.step_s else ""
        return (
            f"{percent}th percentile of the 5-minute means of {resource} usage in the last "
            f"{window}{every}"
        )

    def promql(self) -> str:
        """The recording rule's expression, in the shipped rules' form."""
        source = f"{self.resource}_usage_avg_5m"
        if self.aggregation == "avg":
            return f"avg_over_time({self.resource}_usage_active[5m])"
        window = window_text(self.window_s or 0.0)
        if self.aggregation == "max":
            return f"max_over_time({source}[{window}])"
        step = f":{window_text(self.step_s)}" if self.step_s else ""
        return f"quantile_over_time({self.quantile:.2f}, {source}[{window}{step}])"


def usage_metric(name: str) -> UsageMetric | None:
    """The usage metric a name stands for, or None when it is no name of this grammar
    (or a percentile written wrong: ``percentile_problem`` says how)."""
    match = _NAME.fullmatch(name)
    if match is None:
        return None
    resource, avg, max_n, max_unit, percent, p_n, p_unit = match.groups()
    if avg:
        return UsageMetric(resource, "avg")
    if max_n is not None:
        window_s = int(max_n) * _UNIT_S[max_unit]
        return UsageMetric(resource, "max", window_s) if window_s <= MAX_WINDOW_S else None
    if not _percent_ok(percent):
        return None
    window_s = int(p_n) * _UNIT_S[p_unit]
    if not MIN_WINDOW_S <= window_s <= MAX_WINDOW_S:
        return None
    return UsageMetric(resource, "quantile", window_s, int(percent) / 100)


def _percent_ok(text: str) -> bool:
    return not text.startswith("0") and 1 <= int(text) <= 99


def percentile_problem(name: str) -> str | None:
    """Why a name meant as a percentile metric is malformed, or None (a good one, or a
    name that is no percentile at all)."""
    if not _LOOKS_LIKE_PERCENTILE.search(name) or usage_metric(name) is not None:
        return None
    shape = (
        f"a percentile metric is <cpu|mem>_usage_p<1-99>_avg_<window>, such as {EXAMPLE} "
        f"(the 95th percentile of the 5-minute means over the last hour)"
    )
    match = re.fullmatch(rf"(cpu|mem)_usage_p([0-9]+)_avg_{_WINDOW}", name)
    if match is None:
        return f"metric name {name[:80]!r} looks like a percentile but is not one: {shape}"
    percent, count, unit = match.group(2), match.group(3), match.group(4)
    if not _percent_ok(percent):
        return (
            f"metric name {name!r}: p{percent} is no percentile; write p1 to p99 without a "
            f"leading zero (p90, p95, p99)"
        )
    return (
        f"metric name {name!r}: the window {count}{unit} is outside "
        f"{window_text(MIN_WINDOW_S)} to {window_text(MAX_WINDOW_S)}; a percentile of "
        f"5-minute means needs a window of several of them"
    )


def window_text(seconds: float) -> str:
    """A window as its name writes it: 10m, 1h, 1d."""
    for unit in ("d", "h", "m"):
        if seconds % _UNIT_S[unit] == 0:
            return f"{seconds / _UNIT_S[unit]:g}{unit}"
    return f"{seconds:g}s"


def shipped_percentile_metrics() -> tuple[str, ...]:
    """The percentile metrics deploy/prometheus records, cpu first."""
    return tuple(
        f"{resource}_usage_p{percent}_avg_{window}"
        for resource in RESOURCES
        for percent in SHIPPED_PERCENTILES
        for window in SHIPPED_WINDOWS
    )


# A class of pods' name (``app/policy/classes.py``) is part of an annotation key and of a
# metric name: lower-case letters, digits and '_' (no '-', which a Prometheus-style name
# cannot hold).
CLASS_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")
# The class-usage metrics, by the resource each measures.
CLASS_USAGE_METRICS: Mapping[str, str] = MappingProxyType(
    {"cpu_usage": "cpu", "mem_usage": "memory"}
)


def split_class_metric(metric: str) -> tuple[str, str] | None:
    """(class, resource) of a class-usage metric name such as ``production:cpu_usage``;
    None for any other name."""
    owner, colon, usage = metric.partition(":")
    resource = CLASS_USAGE_METRICS.get(usage)
    if not colon or resource is None or not CLASS_NAME.fullmatch(owner):
        return None
    return owner, resource


def class_unsampled_key(class_name: str, resource: str) -> str:
    """The key of a node's ``unsampled`` usage that a class's usage of a resource reads
    (``app.load.assess``): what the class's own pods placed since the node's sample are
    estimated to use (``production:cpu``)."""
    return f"{class_name}:{resource}"
