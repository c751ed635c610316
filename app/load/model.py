"""The load model: the one place that decides "is this node overloaded" and "how good is it".

Pure functions of a node's annotations, the policy and the clock. The extender's
filter and prioritize verbs, its debug endpoints and the descheduler's planner call
``evaluate_node``; nothing else computes a verdict or a score.

Semantics follow crane-scheduler (see README "Load model"), with these decisions:

* Missing, stale, unreadable or future-dated data never rejects a node: the filter
  fails open so that a broken metrics pipeline cannot stop scheduling.
* In scoring, a metric without fresh data is assumed to be *at its filter limit*
  (``maxLimitPercent``), or fully used when it has no predicate. A node that passes
  the filter with fresh data is at or below every limit, so a node we know nothing
  about never outranks it; unlike crane's "missing counts as 100 %", a new node is
  not shunned as if it were full. ``Policy.missing_scored_as_full`` gives crane's
  rule, for the simulator's faithful crane.
* A timestamp more than ``MAX_FUTURE_SKEW_S`` ahead of the clock is not trusted
  (crane's local-time-with-Z bug produces these in zones east of UTC).

Usage that the samples cannot contain yet (pods placed on a node since its sample
was taken, or evicted from it) is passed in as ``unsampled``: a signed fraction of
the node's allocatable per resource, added to every *fresh* reading of a metric of
that resource (``Policy.resource_of``). Stale or missing data stays what it is, so
the filter still fails open whatever is estimated on a node.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from app.load.samples import HOT_VALUE_KEY, Sample, parse_hot_value, parse_usage
from app.policy import HOT_VALUE_VALID_S, HotValuePolicy, Policy

__all__ = [
    "EXTENDER_SCORE_SCALE",
    "HOT_VALUE_PENALTY_PER_UNIT",
    "MAX_EXTENDER_SCORE",
    "MAX_NODE_SCORE",
    "Freshness",
    "Measurement",
    "MetricReading",
    "NodeLoad",
    "Overload",
    "ScorePart",
    "assess",
    "assumed_usage_fraction",
    "evaluate_node",
    "headroom",
    "hot_value_from_bindings",
    "is_exempt_from_filter",
    "is_system_critical",
    "judged_by",
    "measure",
    "read_fraction",
    "read_usage",
    "score_parts",
]

MAX_FUTURE_SKEW_S = 60.0
# kube-scheduler's framework.MaxNodeScore: a score plugin's range (0..100), crane's too.
MAX_NODE_SCORE = 100
# kube-scheduler's extender.MaxExtenderPriority: an extender answers 0..10 (the native
# verdict index's MAX_SCORE; tests/extender/test_index.py holds both to one answer).
MAX_EXTENDER_SCORE = 10
# kube-scheduler multiplies an extender's score by this and its weight, to set it beside
# the plugins' 0..100; one point of the extender's 0..10 is this many of crane's 0..100.
EXTENDER_SCORE_SCALE = MAX_NODE_SCORE // MAX_EXTENDER_SCORE
# crane subtracts int(hot value * 10) from the 0..100 score.
HOT_VALUE_PENALTY_PER_UNIT = 10


class Freshness(StrEnum):
    FRESH = "fresh"
    STALE = "stale"
    MISSING = "missing"
    UNREADABLE = "unreadable"
    FUTURE = "future"
    NOT_SYNCED = "not-synced"  # the policy has no syncPolicy entry for the metric


@dataclass(frozen=True, slots=True)
class MetricReading:
    metric: str
    freshness: Freshness
    usage_fraction: float | None  # effective: measured + unsampled, never below 0
    timestamp_s: float | None
    unsampled_fraction: float = 0.0  # what was added to the measured value

    @property
    def measured_fraction(self) -> float | None:
        if self.usage_fraction is None:
            return None
        return self.usage_fraction - self.unsampled_fraction

    @property
    def is_fresh(self) -> bool:
        return self.freshness is Freshness.FRESH


@dataclass(frozen=True, slots=True)
class Overload:
    metric: str
    usage_fraction: float
    limit_fraction: float

    @property
    def reason(self) -> str:
        # Names neither the node nor its value, so that kube-scheduler groups identical
        # reasons across nodes in the pod's FailedScheduling event.
        return f"Load[{self.metric}] is too high (> {self.limit_fraction:g})"


@dataclass(frozen=True, slots=True)
class NodeLoad:
    """Everything the load model concludes about one node at one instant."""

    readings: tuple[MetricReading, ...]
    hot_value: int
    hot_value_fresh: bool
    overloads: tuple[Overload, ...]
    load_score: int  # crane's 0..100 score before the hot-value penalty
    score: int  # 0..100 after the hot-value penalty
    extender_score: int  # 0..10, what prioritize returns
    recheck_at_s: float  # the earliest instant at which the clock alone changes this result

    @property
    def overloaded(self) -> bool:
        return bool(self.overloads)

    @property
    def reason(self) -> str | None:
        """The filter reason: the first overloaded predicate in policy order."""
        return self.overloads[0].reason if self.overloads else None


# A node's verdict is recomputed whenever its unsampled estimate changes (each binding
# on it), while its annotations stay the same: parse each distinct value once.
_parse_usage_cached = functools.lru_cache(maxsize=1 << 16)(parse_usage)
_parse_hot_value_cached = functools.lru_cache(maxsize=1 << 12)(parse_hot_value)


@functools.lru_cache(maxsize=1 << 16)
def _reading(metric: str, raw: str, freshness: Freshness) -> MetricReading:
    """The reading of a metric's readable annotation text at this freshness: a function
    of the three alone, so each distinct one is made once (a rewrite of one of a node's
    annotations has all of them read again, and a frozen dataclass costs more to make
    than to look up). Keyed by the text, not its numbers: "-0" reads as itself."""
    sample = _parse_usage_cached(raw)
    assert sample is not None  # only readable texts are asked for
    return MetricReading(metric, freshness, sample.value, sample.timestamp_s)


def read_metric(
    annotations: Mapping[str, str], metric: str, window_s: float | None, now_s: float
) -> tuple[MetricReading, float]:
    """Read one metric annotation; also return when its freshness next changes."""
    raw = annotations.get(metric)
    if raw is None:
        return MetricReading(metric, Freshness.MISSING, None, None), math.inf
    sample = _parse_usage_cached(raw)
    if sample is None:
        return MetricReading(metric, Freshness.UNREADABLE, None, None), math.inf
    freshness, changes_at_s = _freshness(sample, window_s, now_s)
    return _reading(metric, raw, freshness), changes_at_s


def read_fraction(
    annotations: Mapping[str, str], metric: str, window_s: float | None, now_s: float
) -> tuple[Freshness, float | None]:
    """A metric's freshness and value exactly as ``read_metric`` reads them, without the
    reading: for a caller that sizes every node each round (the descheduler) and needs
    the full reading of a few nodes only.

    ``_freshness`` written out, without the instant it changes: the descheduler reads
    two metrics of every node each round (2,000 a round on 1,000 nodes), and the call
    and its tuple were a fifth of a read."""
    raw = annotations.get(metric)
    if raw is None:
        return Freshness.MISSING, None
    sample = _parse_usage_cached(raw)
    if sample is None:
        return Freshness.UNREADABLE, None
    if window_s is None:
        return Freshness.NOT_SYNCED, sample.value
    timestamp_s = sample.timestamp_s
    if now_s < timestamp_s - MAX_FUTURE_SKEW_S:
        return Freshness.FUTURE, sample.value
    if now_s < timestamp_s + window_s:
        return Freshness.FRESH, sample.value
    return Freshness.STALE, sample.value


def _freshness(sample: Sample, window_s: float | None, now_s: float) -> tuple[Freshness, float]:
    # ``read_fraction`` writes this rule out: a change here is a change there.
    if window_s is None:
        return Freshness.NOT_SYNCED, math.inf
    trusted_from_s = sample.timestamp_s - MAX_FUTURE_SKEW_S
    if now_s < trusted_from_s:
        return Freshness.FUTURE, trusted_from_s
    fresh_until_s = sample.timestamp_s + window_s
    if now_s < fresh_until_s:
        return Freshness.FRESH, fresh_until_s
    return Freshness.STALE, math.inf


def read_hot_value(annotations: Mapping[str, str], now_s: float) -> tuple[int, bool, float]:
    """The node's hot value (0 unless fresh), whether it was fresh, and when that changes."""
    raw = annotations.get(HOT_VALUE_KEY)
    sample = _parse_hot_value_cached(raw) if raw is not None else None
    if sample is None:
        return 0, False, math.inf
    freshness, changes_at_s = _freshness(sample, HOT_VALUE_VALID_S, now_s)
    if freshness is Freshness.FRESH:
        return int(sample.value), True, changes_at_s
    return 0, False, changes_at_s


def assumed_usage_fraction(policy: Policy, metric: str) -> float:
    """The usage that scoring assumes for a metric without fresh data (see module doc):
    its filter limit, or fully used where it has none (always, under crane's rule)."""
    if policy.missing_scored_as_full:
        return 1.0
    return dict(policy.limits).get(metric, 1.0)


def find_overloads(readings: Mapping[str, MetricReading], policy: Policy) -> tuple[Overload, ...]:
    overloads = []
    for metric, limit in policy.limits:
        reading = readings.get(metric)
        if reading is None or reading.freshness is not Freshness.FRESH:
            continue
        assert reading.usage_fraction is not None
        if reading.usage_fraction > limit:
            overloads.append(Overload(metric, reading.usage_fraction, limit))
    return tuple(overloads)


def load_score(readings: Mapping[str, MetricReading], policy: Policy) -> int:
    """crane's score: the weighted free fraction of the priority metrics, 0..100; with
    ``spec.packing``, the weighted packing share instead (``priority_share``)."""
    weighted_free, total_weight = _weighted_free(readings, policy)
    if total_weight <= 0:
        return MAX_NODE_SCORE
    return int(weighted_free / total_weight)


def priority_share(usage: float, packing_target: float | None) -> float:
    """One priority metric's share of the score, 0..1, at a usage fraction: crane's free
    fraction ``1 - usage``; with ``spec.packing`` (target ``t``), rising from ``t`` on an
    idle node to 1 at the target, then falling to 0 on a full one, so that the nodes
    nearest the target from below score highest (Trimaran's TargetLoadPacking shape,
    kept continuous at the target)."""
    if packing_target is None:
        return 1.0 - usage
    if usage <= packing_target:
        return packing_target + (1.0 - packing_target) * max(usage, 0.0) / packing_target
    return max(0.0, (1.0 - usage) / (1.0 - packing_target))


def _weighted_free(readings: Mapping[str, MetricReading], policy: Policy) -> tuple[float, float]:
    weighted_free = 0.0
    total_weight = 0.0
    target = policy.packing_target
    # Without fresh data a metric is assumed at its ceiling (module doc).
    for metric, weight, assumed in policy.priority_ceilings:
        reading = readings.get(metric)
        if (
            reading is not None
            and reading.freshness is Freshness.FRESH
            and reading.usage_fraction is not None
        ):
            usage = reading.usage_fraction
        else:
            usage = assumed
        weighted_free += priority_share(usage, target) * weight * MAX_NODE_SCORE
        total_weight += weight
    return weighted_free, total_weight


@dataclass(frozen=True, slots=True)
class ScorePart:
    """One priority metric's share of a node's load score (for ``loadaware explain``)."""

    metric: str
    weight: float
    usage_fraction: float  # what the score used: the fresh reading, or the assumed ceiling
    assumed: bool  # no fresh data: scored at its ceiling (module doc)
    # priority_share(usage) x weight x 100 / Σ weights (crane: 1 - usage); load_score is
    # int(Σ points)
    points: float


def score_parts(readings: Mapping[str, MetricReading], policy: Policy) -> tuple[ScorePart, ...]:
    """``load_score`` taken apart, per priority metric in policy order (float rounding
    aside, ``load_score`` is the whole part of their sum)."""
    total_weight = sum(weight for _, weight, _ in policy.priority_ceilings)
    parts = []
    for metric, weight, assumed in policy.priority_ceilings:
        reading = readings.get(metric)
        fresh = (
            reading is not None
            and reading.freshness is Freshness.FRESH
            and reading.usage_fraction is not None
        )
        usage = reading.usage_fraction if fresh and reading is not None else None
        used = assumed if usage is None else usage
        points = priority_share(used, policy.packing_target) * weight * MAX_NODE_SCORE
        share = points / total_weight if total_weight > 0 else 0.0
        parts.append(ScorePart(metric, weight, used, usage is None, share))
    return tuple(parts)


def apply_hot_value(score: int, hot_value: int) -> int:
    penalised = score - hot_value * HOT_VALUE_PENALTY_PER_UNIT
    return max(0, min(MAX_NODE_SCORE, penalised))


def to_extender_score(score: int) -> int:
    """Map crane's 0..100 onto kube-scheduler's extender range 0..10, rounding half up."""
    bounded = max(0, min(MAX_NODE_SCORE, score))
    step = EXTENDER_SCORE_SCALE
    return (bounded + step // 2) // step


def with_unsampled(reading: MetricReading, unsampled_fraction: float) -> MetricReading:
    """A fresh reading with usage the sample does not contain yet added (or taken away)."""
    if not reading.is_fresh or reading.usage_fraction is None or unsampled_fraction == 0:
        return reading
    effective = max(0.0, reading.usage_fraction + unsampled_fraction)
    return MetricReading(
        reading.metric,
        reading.freshness,
        effective,
        reading.timestamp_s,
        effective - reading.usage_fraction,
    )


@dataclass(frozen=True, slots=True)
class Measurement:
    """What a node's annotations say at one instant, before anything is added to them.

    ``evaluate_node`` is ``assess(measure(...), ...)``; a caller that re-assesses the
    same annotations with a new ``unsampled`` (the extender, on each binding) keeps the
    Measurement until ``changes_at_s`` instead of reading the annotations again.
    """

    readings: Mapping[str, MetricReading]
    resources: Mapping[str, str]  # metric → the resource it measures (Policy.resource_of)
    hot_value: int
    hot_value_fresh: bool
    changes_at_s: float  # the earliest instant at which the clock alone changes it

    def freshest_sample_s(self) -> float | None:
        """The newest timestamp of a fresh reading of a resource metric (cpu_*, mem_*)."""
        stamps = [
            r.timestamp_s
            for metric, r in self.readings.items()
            if r.is_fresh and r.timestamp_s is not None and metric in self.resources
        ]
        return max(stamps) if stamps else None


def measure(annotations: Mapping[str, str], policy: Policy, now_s: float) -> Measurement:
    readings: dict[str, MetricReading] = {}
    changes_at_s = math.inf
    for metric, window_s in policy.metric_windows:
        reading, reading_changes_at_s = read_metric(annotations, metric, window_s, now_s)
        readings[metric] = reading
        if reading_changes_at_s < changes_at_s:
            changes_at_s = reading_changes_at_s
    hot_value, hot_fresh, hot_changes_at_s = read_hot_value(annotations, now_s)
    return Measurement(
        readings,
        policy.metric_resources,
        hot_value,
        hot_fresh,
        min(changes_at_s, hot_changes_at_s),
    )


def read_usage(
    annotations: Mapping[str, str],
    policy: Policy,
    now_s: float,
    metrics: Iterable[str],
    unsampled: Mapping[str, float] | None = None,
) -> dict[str, MetricReading]:
    """Just the readings of ``metrics``, with ``unsampled`` added as ``assess`` adds it:
    for a caller that needs a node's usage and not its verdict (the descheduler sizing
    every node each round). A metric the policy does not name is left out."""
    readings: dict[str, MetricReading] = {}
    resources = policy.unsampled_keys
    named, windows_s = policy.metrics, policy.freshness_windows_s
    for metric in metrics:
        if metric not in named:
            continue
        reading, _ = read_metric(annotations, metric, windows_s.get(metric), now_s)
        if unsampled:
            reading = with_unsampled(reading, unsampled.get(resources.get(metric, ""), 0.0))
        readings[metric] = reading
    return readings


def assess(
    measurement: Measurement, policy: Policy, unsampled: Mapping[str, float] | None = None
) -> NodeLoad:
    """The verdict and score of a measured node, with ``unsampled`` usage added."""
    readings = measurement.readings
    if unsampled:
        resources = policy.unsampled_keys
        readings = {
            metric: with_unsampled(reading, unsampled.get(resources.get(metric, ""), 0.0))
            for metric, reading in readings.items()
        }
    base_score = load_score(readings, policy)
    score = apply_hot_value(base_score, measurement.hot_value)
    return NodeLoad(
        readings=tuple(readings.values()),
        hot_value=measurement.hot_value,
        hot_value_fresh=measurement.hot_value_fresh,
        overloads=find_overloads(readings, policy),
        load_score=base_score,
        score=score,
        extender_score=to_extender_score(score),
        recheck_at_s=measurement.changes_at_s,
    )


# Headroom is kept this far inside the exact boundary, so that rounding can only make a
# caller recompute a node sooner than needed, never later.
_HEADROOM_MARGIN = 1e-9


def headroom(load: NodeLoad, measurement: Measurement, policy: Policy) -> dict[str, float]:
    """Per resource, how much more usage (a fraction of allocatable) could be added to
    the fresh readings of its metrics without changing the node's filter reason or its
    extender score. Usage only ever *added* is meant: the extender uses it to skip
    re-assessing a node for a reservation too small to change what it answers."""
    readings = {reading.metric: reading for reading in load.readings}
    weighted_free, total_weight = _weighted_free(readings, policy)
    # The lowest load score that still maps to the same extender score, hot value included.
    step = EXTENDER_SCORE_SCALE
    lowest_score = (
        step * load.extender_score - step // 2 + load.hot_value * HOT_VALUE_PENALTY_PER_UNIT
    )
    rooms: dict[str, float] = {}
    for resource in set(measurement.resources.values()):
        room = math.inf
        for predicate in policy.spec.predicate:
            reading = readings.get(predicate.name)
            if (
                predicate.max_limit_fraction > 0
                and reading is not None
                and reading.is_fresh
                and reading.usage_fraction is not None
                and measurement.resources.get(predicate.name) == resource
                and reading.usage_fraction <= predicate.max_limit_fraction
            ):
                room = min(room, predicate.max_limit_fraction - reading.usage_fraction)
        weight = sum(
            priority.weight
            for priority in policy.spec.priority
            if (reading := readings.get(priority.name)) is not None
            and reading.is_fresh
            and measurement.resources.get(priority.name) == resource
        )
        if weight > 0 and load.extender_score > 0 and total_weight > 0:
            slack = weighted_free - lowest_score * total_weight
            room = min(room, slack / (weight * MAX_NODE_SCORE))
        rooms[resource] = max(0.0, room - _HEADROOM_MARGIN)
    return rooms


def judged_by(policy: Policy, measurement: Measurement) -> Policy:
    """The policy a node measured as ``measurement`` is judged by for a pod of
    ``policy``'s class: beside the classes whose pods run there (a fresh class usage
    above 0), their limits on the node's own metrics where stricter
    (``app.policy.ClassLimitsAbove``); ``policy`` itself for a policy of no class."""
    limits_above = policy.limits_above
    if limits_above is None:
        return policy
    readings = measurement.readings
    present = frozenset(
        name
        for name, shown_by, _ in limits_above.others
        if any(
            (reading := readings.get(metric)) is not None
            and reading.is_fresh
            and (reading.usage_fraction or 0.0) > 0
            for metric in shown_by
        )
    )
    return limits_above.judged(policy, present) if present else policy


def evaluate_node(
    annotations: Mapping[str, str],
    policy: Policy,
    now_s: float,
    unsampled: Mapping[str, float] | None = None,
) -> NodeLoad:
    """The verdict and score of one node, from its annotations, at ``now_s``.

    ``unsampled`` maps a resource ("cpu", "memory") to usage, as a signed fraction of
    the node's allocatable, that the node's samples do not contain yet (module doc).
    """
    measurement = measure(annotations, policy, now_s)
    return assess(measurement, judged_by(policy, measurement), unsampled)


def hot_value_from_bindings(
    binding_times_s: Iterable[float], now_s: float, hot_policy: Iterable[HotValuePolicy]
) -> int:
    """crane's hot value: Σ over entries of floor(bindings within timeRange / count)."""
    ages_s = [now_s - at_s for at_s in binding_times_s]
    total = 0
    for entry in hot_policy:
        range_s = entry.time_range_s
        # A list's length, not a generator's sum: the simulator asks for every node
        # with recent bindings at every refresh (10,000 a run on thousand-nodes).
        recent = len([age_s for age_s in ages_s if 0 <= age_s < range_s])
        total += recent // entry.count
    return total


# kube-scheduler's system-critical band (scheduling.SystemCriticalPriority) and the two
# PriorityClasses that carry it; the descheduler's DefaultEvictor draws the same line.
SYSTEM_CRITICAL_PRIORITY = 2_000_000_000
SYSTEM_CRITICAL_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})


def is_system_critical(priority: object, priority_class: object) -> bool:
    """Whether a pod's ``spec.priority`` or ``spec.priorityClassName`` puts it in the
    system-critical band (anything else, bools included, is not; a class that is not a
    string, which the API server never sends, is no class rather than a TypeError)."""
    if isinstance(priority_class, str) and priority_class in SYSTEM_CRITICAL_CLASSES:
        return True
    return (
        isinstance(priority, int)
        and not isinstance(priority, bool)
        and priority >= SYSTEM_CRITICAL_PRIORITY
    )


def is_exempt_from_filter(pod: Mapping[str, Any]) -> bool:
    """Which pods always pass the load filter: DaemonSet pods, which must run on every
    node however busy, and system-critical pods (``is_system_critical``: DNS, the CNI,
    loadaware's own extender), which the load filter must never lock out of a cluster
    whose every node reads hot, whatever a tenant's estimate made them read (issue 42).

    Only the controller reference says a pod is a DaemonSet's: any other
    ownerReference is the tenant's own word, and would let any pod skip the load
    filter (docs/security.md, issue 28). The priority is the API server's word: its
    Priority admission resolves ``priorityClassName`` and sets ``spec.priority``; who
    may use the two critical classes is the administrator's to restrict
    (docs/security.md)."""
    # ``type(x) is dict`` first: a parsed request's objects are dicts, and an ABC's
    # isinstance costs 0.2-0.4 µs on the extender's hot path (the same answer).
    spec = pod.get("spec")
    if (type(spec) is dict or isinstance(spec, Mapping)) and is_system_critical(
        spec.get("priority"), spec.get("priorityClassName")
    ):
        return True
    metadata = pod.get("metadata")
    owners = (
        metadata.get("ownerReferences")
        if type(metadata) is dict or isinstance(metadata, Mapping)
        else None
    )
    if not isinstance(owners, list):
        return False
    return any(
        isinstance(owner, Mapping)
        and owner.get("controller") is True
        and owner.get("kind") == "DaemonSet"
        for owner in owners
    )
