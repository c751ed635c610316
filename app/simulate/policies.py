"""The policies a scenario is run under, and which production code each one calls.

==================== ====================================================
policy               decisions made by
==================== ====================================================
default              kube-scheduler approximation (``placement``)
crane                + ``app.load.evaluate_node`` (filter, score, hot value), run
                     as crane-scheduler ships (``scenario.crane``)
loadaware            + ``app.load.evaluate_node`` as loadaware's extender, with
                     the burst estimate from ``app.load.estimate``
default+taints       + the annotator's soft taints (``app.load.taints``) that
                     kube-scheduler's TaintToleration scores (``soft_taints``)
<policy>+desched     + the descheduler's planner (``app.rebalance.plan``)
<policy>+autoscaler  + a node autoscaler deciding by requests, the cluster
                     autoscaler's or Karpenter's (``autoscaling``)
+consolidate         + loadaware's consolidation beside it, drained nodes
                     tainted (``app.rebalance.consolidation``, ``consolidation``)
==================== ====================================================

``loadaware`` passes ``estimation.BurstEstimate`` as the load filter's ``unsampled``,
``default+taints`` the same to the soft taints' rule (``app.load.taints.judge_node``),
both raised to each workload's observed per-pod usage as the annotator publishes it
(``cluster.workload_usage``);
``+desched`` runs ``descheduling.PlannerRebalancer`` every descheduler interval, which
can tell from ``cluster.plan.steering`` which scheduler it works beside.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.simulate.cluster import PolicyPlan

# The names are what `loadaware simulate`'s flags check; the simulation itself (numpy,
# the planner) is imported only when a policy's plan is made.

DEFAULT_POLICIES = (
    "default",
    "crane",
    "loadaware",
    "default+taints",
    "default+desched",
    "crane+desched",
    "loadaware+desched",
    "default+taints+desched",
)
# Known, but run only when named: their node count changes, so they are compared on
# node-hours with each other (``--policies default+autoscaler,...``).
AUTOSCALER_POLICIES = (
    "default+autoscaler",
    "loadaware+autoscaler",
    "loadaware+consolidate+autoscaler",
)
KNOWN_POLICIES = DEFAULT_POLICIES + AUTOSCALER_POLICIES


def unavailable_reason(name: str) -> str | None:
    """Why a policy cannot run on this build, or None if it can."""
    if name not in KNOWN_POLICIES:
        return f"unknown policy {name!r} (known: {', '.join(KNOWN_POLICIES)})"
    return None


def plan_for(name: str) -> PolicyPlan:
    from app.simulate.autoscaling import SimulatedAutoscaler
    from app.simulate.cluster import PolicyPlan
    from app.simulate.consolidation import ConsolidatingRebalancer
    from app.simulate.descheduling import PlannerRebalancer
    from app.simulate.estimation import BurstEstimate

    reason = unavailable_reason(name)
    if reason is not None:
        raise ValueError(reason)
    base, *extras = name.split("+")
    return PolicyPlan(
        name=name,
        load_aware=base != "default",
        crane=base == "crane",
        soft_taints="taints" in extras,
        # the extender's estimate, or the annotator's when it keeps soft taints
        make_estimate=BurstEstimate if base == "loadaware" or "taints" in extras else None,
        # the estimate (the extender's, or the taint rule's) follows each workload's
        # observed per-pod usage, which the annotator publishes whatever the scheduler
        workload_usage=base == "loadaware" or "taints" in extras,
        make_rebalancer=(
            ConsolidatingRebalancer
            if "consolidate" in extras
            else PlannerRebalancer if "desched" in extras else None
        ),
        make_autoscaler=SimulatedAutoscaler if "autoscaler" in extras else None,
    )


def available(names: tuple[str, ...] = DEFAULT_POLICIES) -> list[str]:
    return [name for name in names if unavailable_reason(name) is None]
