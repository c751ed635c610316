"""Nodes where a class of pods is hot: the descheduler moves the pods of lower classes
off them first (issue 45; ``app/policy/classes.py``).

A policy's class judges a node for its own pods by its class policy's limits on the
node's metrics (the policy's, with the class's own in place). A node that runs pods of a
class and whose measured usage (the descheduler's ``metrics``, as every node is
measured) is above that class's limit on one of them is a source this round, with the
class's limit as its threshold, even when it is under ``targetThresholds``; and from it
only pods of a *lower* priority than the class's range may go (``evictable_below``):
moving batch off a node where production is hot is what helps production, moving
production is not. A node already above ``targetThresholds`` stays the ordinary source
it is (its victims are ordered lowest priority first anyway), unless every pod on it is
in a class: then its classes' limits are its thresholds (the strictest of theirs), so a
batch node run as hot as the batch class allows is left alone, since moving its pods
would undo what the policy allows them, and one past them sheds down to them. The most
important class (highest ``minPriority``) hot on a node decides.

Not debounced by ``consecutiveHotRounds``: the limit is the one the extender already
keeps the class's pods under, and only lower-priority pods move. A policy without
classes adds no source.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from app.objects import PodInfo
from app.policy import Policy, pod_classes
from app.rebalance.config import DeschedulerConfig
from app.rebalance.outcome import NodeClass, NodeKind


def class_sources(
    classes: Mapping[str, NodeClass],
    pods_by_node: Mapping[str, Sequence[PodInfo]],
    policy: Policy,
    config: DeschedulerConfig,
) -> tuple[dict[str, NodeClass], dict[str, int]]:
    """(node -> its class as a source, node -> the priority from which pods stay) for the
    nodes where a class of pods is hot (module doc)."""
    pod_class = pod_classes(policy)
    if not pod_class:
        return {}, {}
    ranked = sorted(pod_class.classes, key=lambda c: -c.min_priority)
    sources: dict[str, NodeClass] = {}
    below: dict[str, int] = {}
    for name, node_class in classes.items():
        if node_class.kind in (NodeKind.EXCLUDED, NodeKind.NO_DATA):
            continue
        pods = pods_by_node.get(name, ())
        present = {pod_class.class_of(pod.priority, pod.labels) for pod in pods}
        if node_class.kind is NodeKind.SOURCE:
            within = _within_its_classes(node_class, present, pod_class.policies, config)
            if within is not None:
                sources[name] = within
            continue
        for entry in ranked:
            if entry.name not in present:
                continue
            limits = dict(pod_class.policies[entry.name].limits)
            high = dict(node_class.high_fraction)
            over = []
            for resource in config.resources:
                limit = limits.get(config.metric_for(resource))
                if limit is None:
                    continue
                high[resource] = min(high.get(resource, 1.0), limit)
                if node_class.usage_fraction[resource] > limit:
                    over.append(f"{resource} {node_class.usage_fraction[resource]:.0%} > {limit:g}")
            if over:
                reason = f"class {entry.name} is hot: {', '.join(over)} (its limit)"
                sources[name] = NodeClass(
                    name,
                    NodeKind.SOURCE,
                    node_class.usage_fraction,
                    high,
                    node_class.low_fraction,
                    True,
                    node_class.hot_rounds,
                    reason,
                )
                below[name] = entry.min_priority
                break
    return sources, below


def _within_its_classes(
    node_class: NodeClass,
    present: set[str | None],
    policies: Mapping[str, Policy],
    config: DeschedulerConfig,
) -> NodeClass | None:
    """A source above ``targetThresholds`` whose every pod is in a class is judged by its
    classes' limits instead (per resource the strictest of theirs; ``targetThresholds``
    where none of them limits it): left alone within them (a batch node run as hot as
    the batch class allows), else a source down to them. None: some pod is in no class,
    and the node stays the source it is."""
    if not present or None in present:
        return None
    high = dict(node_class.high_fraction)
    for resource in config.resources:
        metric = config.metric_for(resource)
        limits = [dict(policies[str(name)].limits).get(metric) for name in present]
        if all(limit is not None for limit in limits):
            high[resource] = min(limit for limit in limits if limit is not None)
    names = ", ".join(sorted(str(name) for name in present))
    over = [r for r in config.resources if node_class.usage_fraction[r] > high[r]]
    usage = node_class.usage_fraction
    if over:
        text = ", ".join(f"{r} {usage[r]:.0%} > {high[r]:g}" for r in over)
        kind, hot = NodeKind.SOURCE, True
        reason = f"{text} (the limits of its pods' classes: {names})"
    else:
        kind, hot = NodeKind.NEUTRAL, False
        reason = f"above targetThresholds, within the limits of its pods' classes ({names})"
    return NodeClass(
        node_class.node,
        kind,
        node_class.usage_fraction,
        high,
        node_class.low_fraction,
        hot,
        node_class.hot_rounds if hot else 0,
        reason,
    )
