"""The policies a scenario is run under, and which production code each one calls.

==================== ====================================================
policy               decisions made by
==================== ====================================================
default              kube-scheduler approximation (``placement``)
crane                + ``app.load.evaluate_node`` (filter, score, hot value)
loadaware            + the burst estimate from ``app.load.estimate``
<policy>+desched     + the descheduler's planner (``app.rebalance.plan``)
==================== ====================================================

``loadaware`` and the ``+desched`` variants need the estimate and the planner; on a
build without them they are listed as unavailable, with the reason.
"""

from __future__ import annotations

import importlib.util

from app.simulate.cluster import PolicyPlan

DEFAULT_POLICIES = (
    "default",
    "crane",
    "loadaware",
    "default+desched",
    "crane+desched",
    "loadaware+desched",
)


def _missing(module: str) -> bool:
    return importlib.util.find_spec(module) is None


def unavailable_reason(name: str) -> str | None:
    """Why a policy cannot run on this build, or None if it can."""
    base, _, extra = name.partition("+")
    if base not in ("default", "crane", "loadaware") or extra not in ("", "desched"):
        return f"unknown policy {name!r} (known: {', '.join(DEFAULT_POLICIES)})"
    if base == "loadaware" and _missing("app.load.estimate"):
        return "needs the burst estimate (app/load/estimate.py), not in this build yet"
    if extra and _missing("app.rebalance"):
        return "needs the descheduler's planner (app/rebalance/), not in this build yet"
    return None


def plan_for(name: str) -> PolicyPlan:
    reason = unavailable_reason(name)
    if reason is not None:
        raise ValueError(reason)
    base, _, _ = name.partition("+")
    return PolicyPlan(name=name, load_aware=base != "default")


def available(names: tuple[str, ...] = DEFAULT_POLICIES) -> list[str]:
    return [name for name in names if unavailable_reason(name) is None]
