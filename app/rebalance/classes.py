"""Node classes on real usage, as LowNodeUtilization draws them, plus debounce.

* destination: every balanced resource at or below ``thresholds``, Ready and schedulable;
* source: any resource above ``targetThresholds`` for ``consecutiveHotRounds`` rounds
  (``debouncing`` until then);
* no-data: a resource's metric is stale, missing or unreadable. Such a node is neither
  a source nor a destination. This is the opposite of the extender's filter, which
  fails open: scheduling must go on without metrics, evicting must not.

With ``useDeviationThresholds`` both thresholds are measured from the mean usage of
the nodes with data: low = mean - thresholds, high = mean + targetThresholds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from app.objects import NodeInfo
from app.rebalance.config import DeschedulerConfig, NodePool, pool_of, pool_thresholds
from app.rebalance.measure import Measured, Measurement
from app.rebalance.outcome import NodeClass, NodeKind


@dataclass(frozen=True, slots=True)
class Thresholds:
    low_fraction: Mapping[str, float]
    high_fraction: Mapping[str, float]


def thresholds(
    measured: Iterable[Measurement], config: DeschedulerConfig, pool: NodePool | None = None
) -> Thresholds:
    """The thresholds as fractions: the configuration's, or ``pool``'s (``nodePools``);
    with useDeviationThresholds, from the mean of ``measured`` (the nodes considered:
    with a pool, its own)."""
    low_percent, high_percent = (
        (config.thresholds, config.target_thresholds)
        if pool is None
        else pool_thresholds(config, pool)
    )
    low: dict[str, float] = {r: low_percent[r] / 100 for r in config.resources}
    high: dict[str, float] = {r: high_percent[r] / 100 for r in config.resources}
    if not config.use_deviation_thresholds:
        return Thresholds(low, high)
    with_data = [usage for _, usage, missing, _, _ in measured if missing is None]
    if not with_data:
        return Thresholds(low, high)
    count = len(with_data)
    mean = {r: sum(u[r] for u in with_data) / count for r in config.resources}
    return Thresholds(
        {r: max(0.0, mean[r] - low[r]) for r in config.resources},
        {r: min(1.0, mean[r] + high[r]) for r in config.resources},
    )


def selected(node: NodeInfo, config: DeschedulerConfig) -> bool:
    selector = config.node_selector
    if not selector:  # every node, asked twice a round of each: no generator to build
        return True
    labels = node.labels
    return all(labels.get(key) == value for key, value in selector.items())


def classify(
    node: NodeInfo,
    fractions: Mapping[str, float],
    missing: str | None,
    limits: Thresholds,
    config: DeschedulerConfig,
    hot_rounds: Mapping[str, int],
) -> NodeClass:
    """A node's class from its measurement: its usage fractions per balanced resource
    with fresh data, and why one has none (``missing``)."""
    name = node.name
    low, high = limits.low_fraction, limits.high_fraction
    # Every node is classified each round: plain loops, no closure or generator to build.
    if not selected(node, config):
        return NodeClass(
            name, NodeKind.EXCLUDED, fractions, high, low, False, 0, "not selected by nodeSelector"
        )
    if missing is not None:
        return NodeClass(name, NodeKind.NO_DATA, fractions, high, low, False, 0, missing)
    resources = config.resources
    over = [r for r in resources if fractions[r] > high[r]]
    if over:
        rounds = hot_rounds.get(name, 0) + 1
        text = ", ".join(f"{r} {fractions[r]:.0%} > {high[r]:.0%}" for r in over)
        if rounds >= config.consecutive_hot_rounds:
            return NodeClass(name, NodeKind.SOURCE, fractions, high, low, True, rounds, text)
        wanted = config.consecutive_hot_rounds
        reason = f"{text} (round {rounds} of {wanted})"
        return NodeClass(name, NodeKind.DEBOUNCING, fractions, high, low, True, rounds, reason)
    for r in resources:
        if not fractions[r] <= low[r]:  # as all(<=) reads it: NaN is not underutilized
            reason = "appropriately used"
            return NodeClass(name, NodeKind.NEUTRAL, fractions, high, low, False, 0, reason)
    if not node.ready or node.unschedulable:
        reason = "underutilized but not Ready or unschedulable"
        return NodeClass(name, NodeKind.NEUTRAL, fractions, high, low, False, 0, reason)
    return NodeClass(name, NodeKind.DESTINATION, fractions, high, low, False, 0, "underutilized")


def classify_all(
    measured: Measured, config: DeschedulerConfig, hot_rounds: Mapping[str, int]
) -> dict[str, NodeClass]:
    """Every measured node's class, from its measurement (``Measured.rows``): no node's
    ``NodeUsage`` is made to classify it."""
    rows = measured.rows
    if config.node_pools:
        return _classify_pools(measured, config, hot_rounds)
    # Fixed thresholds read no usage: only deviation thresholds need the nodes considered.
    considered = (
        [row for row in rows if selected(row[0], config)] if config.use_deviation_thresholds else []
    )
    limits = thresholds(considered, config)
    return {
        node.name: classify(node, usage, missing, limits, config, hot_rounds)
        for node, usage, missing, _, _ in rows
    }


def _classify_pools(
    measured: Measured, config: DeschedulerConfig, hot_rounds: Mapping[str, int]
) -> dict[str, NodeClass]:
    """``classify_all`` with node pools: each node by its pool's thresholds (with
    useDeviationThresholds, from the mean of its pool's nodes), the nodes in no pool,
    or in several, by the configuration's own."""
    pools = {row[0].name: pool_of(config, row[0]).pool for row in measured.rows}
    members: dict[str | None, list[Measurement]] = {}
    for row in measured.rows:
        if selected(row[0], config):
            pool = pools[row[0].name]
            members.setdefault(None if pool is None else pool.name, []).append(row)
    by_name = {pool.name: pool for pool in config.node_pools}
    limits = {
        name: thresholds(members.get(name, ()), config, by_name.get(name or ""))
        for name in (None, *by_name)
    }
    return {
        node.name: classify(
            node,
            usage,
            missing,
            limits[None if (pool := pools[node.name]) is None else pool.name],
            config,
            hot_rounds,
        )
        for node, usage, missing, _, _ in measured.rows
    }


def nothing_to_do(classes: Mapping[str, NodeClass], config: DeschedulerConfig) -> str | None:
    """LowNodeUtilization's reasons to stop before choosing any pod, or None."""
    kinds = [c.kind for c in classes.values()]
    sources = kinds.count(NodeKind.SOURCE)
    destinations = kinds.count(NodeKind.DESTINATION)
    if not sources:
        debouncing = kinds.count(NodeKind.DEBOUNCING)
        untainted = kinds.count(NodeKind.UNTAINTED)
        waiting = [
            f"{debouncing} hot node(s) still debouncing" if debouncing else "",
            f"{untainted} hot node(s) without the soft taint" if untainted else "",
        ]
        suffix = f" ({', '.join(w for w in waiting if w)})" if debouncing or untainted else ""
        if untainted:
            return f"no source nodes: no hot node carries the soft taint{suffix}"
        return f"no source nodes: no node is above targetThresholds long enough{suffix}"
    if not destinations:
        return "no destination nodes: no Ready, schedulable node is below thresholds"
    if destinations <= config.number_of_nodes:
        return (
            f"only {destinations} underutilized node(s), numberOfNodes requires more than "
            f"{config.number_of_nodes}"
        )
    return None
