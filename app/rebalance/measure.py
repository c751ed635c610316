"""Each node's usage per resource, read through the load model.

The usage of a resource is the fresh reading of its configured metric, with the
convergence adjustments passed as ``unsampled``. Every node is sized each round, so
only the balanced metrics are read (``read_usage``); the full verdict
(``evaluate_node``) is taken for destinations only. Nothing here parses an annotation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from app.load import MetricReading, NodeLoad, evaluate_node, read_usage
from app.objects import RESOURCES, EvictionRecord, NodeInfo
from app.policy import Policy
from app.rebalance.config import DeschedulerConfig
from app.rebalance.convergence import as_fractions, unsampled_amounts


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
    """The load model on a node with signed unsampled amounts (cores, bytes)."""
    fractions = as_fractions(unsampled, allocatable_of(node))
    return evaluate_node(node.annotations, policy, now_s, fractions or None)


def usage_of(
    node: NodeInfo, readings: Mapping[str, MetricReading], config: DeschedulerConfig
) -> tuple[dict[str, float], str | None]:
    usage: dict[str, float] = {}
    for resource in config.resources:
        metric = config.metrics[resource]
        reading = readings.get(metric)
        if reading is None:
            return usage, f"{metric} is not in the policy's syncPolicy"
        if not reading.is_fresh or reading.usage_fraction is None:
            return usage, f"{metric} is {reading.freshness.value}"
        if node.allocatable.get(resource) <= 0:
            return usage, f"allocatable {resource} is unknown"
        usage[resource] = reading.usage_fraction
    return usage, None


def measure_nodes(
    nodes: Sequence[NodeInfo],
    config: DeschedulerConfig,
    policy: Policy,
    now_s: float,
    records: Sequence[EvictionRecord],
) -> dict[str, NodeUsage]:
    metrics = tuple(dict.fromkeys(config.metrics.values()))
    raw = {node.name: read_usage(node.annotations, policy, now_s, metrics) for node in nodes}
    # Only the nodes that recent evictions name can lack what their samples show.
    named = {r.node for r in records} | {r.destination for r in records if r.destination}
    sampled = sample_times({name: raw[name] for name in named if name in raw}, config)
    amounts = unsampled_amounts(records, sampled, config.settle_time, RESOURCES)
    measured: dict[str, NodeUsage] = {}
    for node in nodes:
        unsampled = amounts.get(node.name, {})
        fractions = as_fractions(unsampled, allocatable_of(node)) if unsampled else None
        readings = (
            read_usage(node.annotations, policy, now_s, metrics, fractions)
            if fractions
            else raw[node.name]
        )
        usage, missing = usage_of(node, readings, config)
        measured[node.name] = NodeUsage(node, readings, usage, missing, unsampled)
    return measured


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
