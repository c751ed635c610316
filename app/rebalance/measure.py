"""Each node's usage per resource, read through the load model.

The usage of a resource is the fresh reading of its configured metric, with the
convergence adjustments passed as ``unsampled``. Every node is sized each round, so
only the balanced metrics are read, and only their values and freshness
(``read_fraction``): a round that finds no source reads no more. A node's full
readings (``read_usage``) are made when the plan goes on to use them (``_Readings``),
as is its ``NodeUsage`` (``Measured``), and the full verdict (``evaluate_node``) for
destinations only. Nothing here parses an annotation.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from app.load import (
    Freshness,
    MetricReading,
    NodeLoad,
    evaluate_node,
    read_fraction,
    read_usage,
)
from app.objects import RESOURCES, EvictionRecord, NodeInfo
from app.policy import Policy
from app.rebalance.config import DeschedulerConfig
from app.rebalance.convergence import as_fractions, unsampled_amounts

_NONE: Mapping[str, float] = MappingProxyType({})  # no unsampled usage: shared, read-only


@dataclass(frozen=True, slots=True)
class NodeUsage:
    node: NodeInfo
    readings: Mapping[str, MetricReading]  # the balanced metrics', convergence included
    usage_fraction: Mapping[str, float]  # per balanced resource with fresh data
    missing: str | None  # why a balanced resource has no usable reading
    unsampled: Mapping[str, float]  # signed amounts (cores, bytes) added by convergence


def allocatable_of(node: NodeInfo) -> dict[str, float]:
    return {resource: node.allocatable.get(resource) for resource in RESOURCES}


def readings_of(load: NodeLoad) -> dict[str, MetricReading]:
    return {reading.metric: reading for reading in load.readings}


def evaluate(
    node: NodeInfo, policy: Policy, now_s: float, unsampled: Mapping[str, float]
) -> NodeLoad:
    """The load model on a node with signed unsampled amounts (cores, bytes), under the
    limits of the node's pool (``Policy.for_node``; app/policy/pools.py)."""
    fractions = as_fractions(unsampled, allocatable_of(node))
    return evaluate_node(node.annotations, policy.for_node(node.labels), now_s, fractions or None)


def usage_of(
    node: NodeInfo, readings: Mapping[str, MetricReading], config: DeschedulerConfig
) -> tuple[dict[str, float], str | None]:
    return _usage(node, readings, balanced_metrics(config))


def balanced_metrics(config: DeschedulerConfig) -> tuple[tuple[str, str], ...]:
    """(resource, metric) per balanced resource, in the planner's order."""
    return tuple((resource, config.metrics[resource]) for resource in config.resources)


def _usage(
    node: NodeInfo, readings: Mapping[str, MetricReading], balanced: Sequence[tuple[str, str]]
) -> tuple[dict[str, float], str | None]:
    """The balanced resources' usage fractions, or why one has no usable reading (the
    first such resource in order). Every node is sized each round: plain loops, and the
    metric of each resource looked up once a round (``balanced``), not once a node."""
    usage: dict[str, float] = {}
    for resource, metric in balanced:
        reading = readings.get(metric)
        if reading is None:
            return usage, f"{metric} is not in the policy's syncPolicy"
        fraction = reading.usage_fraction
        if reading.freshness is not Freshness.FRESH or fraction is None:
            return usage, f"{metric} is {reading.freshness.value}"
        if node.allocatable.get(resource) <= 0:
            return usage, f"allocatable {resource} is unknown"
        usage[resource] = fraction
    return usage, None


def measure_nodes(
    nodes: Sequence[NodeInfo],
    config: DeschedulerConfig,
    policy: Policy,
    now_s: float,
    records: Sequence[EvictionRecord],
) -> Measured:
    metrics = tuple(dict.fromkeys(config.metrics.values()))
    # Only the nodes that recent evictions name can lack what their samples show.
    named = {r.node for r in records} | {r.destination for r in records if r.destination}
    raw = (
        {
            node.name: read_usage(node.annotations, policy, now_s, metrics)
            for node in nodes
            if node.name in named
        }
        if named
        else {}
    )
    sampled = sample_times(raw, config)
    amounts = unsampled_amounts(records, sampled, config.settle_time, RESOURCES)
    rows: list[Measurement] = []
    balanced = balanced_metrics(config)
    # Per balanced resource, its metric's window, or None when the policy does not
    # name the metric (``read_usage`` leaves such a metric out of the readings).
    windows = [
        (resource, metric, metric in policy.metrics, policy.freshness_window_s(metric))
        for resource, metric in balanced
    ]
    for node in nodes:
        unsampled = amounts.get(node.name) if amounts else None
        fractions = as_fractions(unsampled, allocatable_of(node)) if unsampled else None
        if fractions:  # only the few nodes recent evictions name
            adjusted = read_usage(node.annotations, policy, now_s, metrics, fractions)
            usage, missing = _usage(node, adjusted, balanced)
            readings: Mapping[str, MetricReading] | None = adjusted
        else:
            # The same readings as ``raw`` (or as read on demand), so the same usage:
            # ``_fresh_usage`` reads exactly what ``_usage`` would read from them.
            readings = raw.get(node.name)
            usage, missing = _fresh_usage(node, windows, now_s)
        rows.append((node, usage, missing, unsampled, readings))
    return Measured(rows, policy, now_s, metrics)


# A node's measurement as the round makes it: the node, its usage fractions, why a
# balanced resource has no usable reading, its unsampled amounts (None: none), and its
# readings where they were made (None: read on demand, without unsampled usage).
Measurement = tuple[
    NodeInfo,
    dict[str, float],
    str | None,
    Mapping[str, float] | None,
    Mapping[str, MetricReading] | None,
]


class Measured(Mapping[str, NodeUsage]):
    """Every node's measurement, by name, in the order measured (``rows``); a node's
    ``NodeUsage`` is made on first use. Classifying reads the rows alone, and a round
    uses the ``NodeUsage`` of its sources and destinations only: a round without a
    source makes none, where it made two objects per node (a ``NodeUsage`` and its
    ``_Readings``)."""

    __slots__ = ("_index", "_made", "_metrics", "_now_s", "_policy", "rows")

    def __init__(
        self, rows: list[Measurement], policy: Policy, now_s: float, metrics: tuple[str, ...]
    ) -> None:
        self.rows = rows
        self._policy = policy
        self._now_s = now_s
        self._metrics = metrics
        self._index: dict[str, int] | None = None
        self._made: dict[str, NodeUsage] = {}

    def __getitem__(self, name: str) -> NodeUsage:
        made = self._made.get(name)
        if made is not None:
            return made
        if self._index is None:
            self._index = {row[0].name: i for i, row in enumerate(self.rows)}
        node, usage, missing, unsampled, readings = self.rows[self._index[name]]
        if readings is None:
            readings = _Readings(node.annotations, self._policy, self._now_s, self._metrics)
        made = self._made[name] = NodeUsage(node, readings, usage, missing, unsampled or _NONE)
        return made

    def __iter__(self) -> Iterator[str]:
        return (row[0].name for row in self.rows)

    def __len__(self) -> int:
        return len(self.rows)


def _fresh_usage(
    node: NodeInfo,
    windows: Sequence[tuple[str, str, bool, float | None]],
    now_s: float,
) -> tuple[dict[str, float], str | None]:
    """``_usage`` of the readings ``read_usage`` makes without unsampled usage, read
    straight from the annotations (``read_fraction``), with no reading made: checked in
    the same order, with the same reasons."""
    usage: dict[str, float] = {}
    annotations = node.annotations
    for resource, metric, in_policy, window_s in windows:
        if not in_policy:
            return usage, f"{metric} is not in the policy's syncPolicy"
        freshness, fraction = read_fraction(annotations, metric, window_s, now_s)
        if freshness is not Freshness.FRESH or fraction is None:
            return usage, f"{metric} is {freshness.value}"
        if node.allocatable.get(resource) <= 0:
            return usage, f"allocatable {resource} is unknown"
        usage[resource] = fraction
    return usage, None


class _Readings(Mapping[str, MetricReading]):
    """A node's ``read_usage`` readings, made on first use: a round reads the readings
    of its sources and destinations only, not those of every node it sized."""

    __slots__ = ("_annotations", "_metrics", "_now_s", "_policy", "_readings")

    def __init__(
        self, annotations: Mapping[str, str], policy: Policy, now_s: float, metrics: tuple[str, ...]
    ) -> None:
        self._annotations = annotations
        self._policy = policy
        self._now_s = now_s
        self._metrics = metrics
        self._readings: dict[str, MetricReading] | None = None

    def _made(self) -> dict[str, MetricReading]:
        if self._readings is None:
            self._readings = read_usage(self._annotations, self._policy, self._now_s, self._metrics)
        return self._readings

    def __getitem__(self, metric: str) -> MetricReading:
        return self._made()[metric]

    def __iter__(self) -> Iterator[str]:
        return iter(self._made())

    def __len__(self) -> int:
        return len(self._made())


def sample_times(
    readings: Mapping[str, Mapping[str, MetricReading]], config: DeschedulerConfig
) -> dict[str, dict[str, float | None]]:
    times: dict[str, dict[str, float | None]] = {}
    for name, node_readings in readings.items():
        per_resource: dict[str, float | None] = {}
        for resource, metric in config.metrics.items():
            reading = node_readings.get(metric)
            per_resource[resource] = reading.timestamp_s if reading else None
        times[name] = per_resource
    return times
