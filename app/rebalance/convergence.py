"""Usage the node samples do not show yet, because of the descheduler's own evictions.

Metrics lag an eviction by minutes. Until a node's sample of a resource's metric is
``settleTime`` newer than an eviction, the evicted pod's usage is taken off its source
and added to the destination the plan reserved for it. A second plan on unchanged
metrics therefore sees the first plan's effect and evicts nothing more; the records
come from the cluster (the descheduler's Events), so this holds across restarts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from app.objects import EvictionRecord

# node -> resource -> sample timestamp (unix s) of that resource's metric, None if none
SampleTimes = Mapping[str, Mapping[str, float | None]]


def _unsettled(sample_s: float | None, record: EvictionRecord, settle_s: float) -> bool:
    """Equal times stay unsettled: with ``settleTime: 0`` a sample stamped in the second
    of the eviction (timestamps have 1-second resolution) cannot show it yet."""
    return sample_s is None or sample_s <= record.evicted_at_s + settle_s


def unsampled_amounts(
    records: Iterable[EvictionRecord],
    sample_times: SampleTimes,
    settle_s: float,
    resources: Iterable[str],
) -> dict[str, dict[str, float]]:
    """Signed usage (cores, bytes) per node and resource that its samples lack."""
    amounts: dict[str, dict[str, float]] = {}
    wanted = tuple(resources)

    def add(node: str, record: EvictionRecord, sign: float) -> None:
        times = sample_times.get(node)
        if times is None:
            return  # a node we do not see any more
        for resource in wanted:
            if _unsettled(times.get(resource), record, settle_s):
                per_node = amounts.setdefault(node, {})
                delta = sign * record.usage.get(resource)
                per_node[resource] = per_node.get(resource, 0.0) + delta

    for record in records:
        add(record.node, record, -1.0)
        if record.destination is not None:
            add(record.destination, record, 1.0)
    return amounts


def as_fractions(
    amounts: Mapping[str, float], allocatable: Mapping[str, float]
) -> dict[str, float]:
    """Absolute amounts as fractions of allocatable (what ``evaluate_node`` takes)."""
    return {
        resource: amount / allocatable[resource]
        for resource, amount in amounts.items()
        if allocatable.get(resource, 0.0) > 0
    }
