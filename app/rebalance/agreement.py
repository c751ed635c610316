"""Do the descheduler's thresholds and the scheduler's load filter agree, or do pods bounce?

The extender refuses a node whose metric is above the policy's ``maxLimitPercent``; the
descheduler evicts from a node above ``targetThresholds`` and sends pods only to nodes
at or below ``thresholds``. Per balanced resource, with its configured metric:

* ``targetThresholds`` below ``maxLimitPercent``: a node between the two is one the
  scheduler still fills and the descheduler empties. Pods bounce between runs.
* ``thresholds`` above ``maxLimitPercent``: the descheduler counts as cool a node the
  scheduler refuses. The planner's own load-filter check keeps it from choosing such a
  destination, so nothing bounces, but the node never receives pods: a wasted class.
* no predicate (or 0) for the metric: the scheduler does not filter on it at all and
  may put pods back on a node the descheduler just emptied.

With ``useDeviationThresholds`` the thresholds move with the mean and cannot be
compared statically; that is said too. The descheduler logs these at start and on
each reload, and every plan carries them as notes (so ``--dry-run`` prints them).
"""

from __future__ import annotations

from collections.abc import Mapping

from app.policy import Policy
from app.rebalance.config import DeschedulerConfig, Resource, pool_thresholds

__all__ = ["threshold_conflicts"]


def threshold_conflicts(config: DeschedulerConfig, policy: Policy) -> list[str]:
    """Plain sentences, one per disagreement that makes pods bounce or wastes nodes."""
    if config.use_deviation_thresholds:
        return [
            "useDeviationThresholds is on: targetThresholds move with the mean usage and "
            "cannot be checked against the policy's maxLimitPercent; a node the scheduler "
            "accepts may be one the descheduler empties"
        ]
    conflicts = _conflicts(config, policy, config.thresholds, config.target_thresholds, "")
    # Node pools: a pool of the configuration against the policy's pool of the same name
    # (the policy's own limits where it has none), and a pool only the policy has
    # against the configuration's own thresholds (docs/tuning.md, "Node pools").
    pools = {name for name, _, _ in policy.node_pools.pools}
    for pool in config.node_pools:
        judged = policy.node_pools.of(pool.name) if pool.name in pools else policy
        low, high = pool_thresholds(config, pool)
        conflicts += _conflicts(config, judged, low, high, f"nodePools {pool.name!r}: ")
    for name in sorted(pools - {pool.name for pool in config.node_pools}):
        conflicts += _conflicts(
            config,
            policy.node_pools.of(name),
            config.thresholds,
            config.target_thresholds,
            f"the policy's nodePools {name!r} (no pool of that name in the configuration): ",
        )
    return conflicts


def _conflicts(
    config: DeschedulerConfig,
    policy: Policy,
    thresholds: Mapping[Resource, float],
    target_thresholds: Mapping[Resource, float],
    prefix: str,
) -> list[str]:
    limits = {p.name: p.max_limit_fraction for p in policy.spec.predicate}
    conflicts = []
    for resource in config.resources:
        metric = config.metrics[resource]
        target = target_thresholds[resource]
        low = thresholds[resource]
        limit = limits.get(metric, 0.0)
        if limit <= 0:
            conflicts.append(
                f"{prefix}pods may bounce on {resource}: the policy has no predicate on "
                f"{metric}, so the scheduler places pods on nodes above "
                f"targetThresholds.{resource} ({target:g}%) that the descheduler then empties; "
                f"add a predicate {{name: {metric}, maxLimitPercent: {target / 100:g}}}"
            )
            continue
        if target < limit * 100 - 1e-9:
            conflicts.append(
                f"{prefix}pods bounce on {resource}: targetThresholds.{resource} is {target:g}% "
                f"but the policy's {metric} maxLimitPercent is {limit * 100:g}%, so a node "
                f"between the two is one the scheduler still fills and the descheduler "
                f"empties; set targetThresholds.{resource} to at least {limit * 100:g} or "
                f"maxLimitPercent to at most {target / 100:g}"
            )
        if low > limit * 100 + 1e-9:
            conflicts.append(
                f"{prefix}thresholds.{resource} is {low:g}%, above the policy's {metric} "
                f"maxLimitPercent ({limit * 100:g}%): a node the descheduler counts as cool "
                f"may be one the scheduler refuses; such a node is never chosen as a "
                f"destination (the planner applies the load filter), lower thresholds.{resource}"
            )
    return conflicts
