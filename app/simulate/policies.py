"""The policies a scenario is run under, and which production code each one calls.

==================== ====================================================
policy               decisions made by
==================== ====================================================
default              kube-scheduler approximation (``placement``)
crane                + ``app.load.evaluate_node`` (filter, score, hot value), run
                     as crane-scheduler ships (``scenario.crane``)
loadaware            + ``app.load.evaluate_node`` as loadaware's extender, with
                     the burst estimate from ``app.load.estimate``
<policy>+desched     + the descheduler's planner (``app.rebalance.plan``)
==================== ====================================================

``loadaware`` passes ``estimation.BurstEstimate`` as the load filter's ``unsampled``;
``+desched`` runs ``descheduling.PlannerRebalancer`` every descheduler interval.
"""

from __future__ import annotations

from app.simulate.cluster import PolicyPlan
from app.simulate.descheduling import PlannerRebalancer
from app.simulate.estimation import BurstEstimate

DEFAULT_POLICIES = (
    "default",
    "crane",
    "loadaware",
    "default+desched",
    "crane+desched",
    "loadaware+desched",
)


def unavailable_reason(name: str) -> str | None:
    """Why a policy cannot run on this build, or None if it can."""
    base, _, extra = name.partition("+")
    if base not in ("default", "crane", "loadaware") or extra not in ("", "desched"):
        return f"unknown policy {name!r} (known: {', '.join(DEFAULT_POLICIES)})"
    return None


def plan_for(name: str) -> PolicyPlan:
    reason = unavailable_reason(name)
    if reason is not None:
        raise ValueError(reason)
    base, _, extra = name.partition("+")
    return PolicyPlan(
        name=name,
        load_aware=base != "default",
        crane=base == "crane",
        make_estimate=BurstEstimate if base == "loadaware" else None,
        make_rebalancer=PlannerRebalancer if extra == "desched" else None,
    )


def available(names: tuple[str, ...] = DEFAULT_POLICIES) -> list[str]:
    return [name for name in names if unavailable_reason(name) is None]
