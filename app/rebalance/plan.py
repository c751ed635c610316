"""The planning pass: node classes, then victims and their destinations, in order."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from app.load.resources import Resources
from app.policy import Policy
from app.rebalance.config import DeschedulerConfig
from app.rebalance.outcome import (
    EvictionPlan,
    NodeClass,
    NodeKind,
    PlannedEviction,
    SkippedPod,
)
from app.rebalance.render import render_plan
from app.rebalance.view import (
    ClusterView,
    EvictionRecord,
    LabelRequirement,
    LabelSelector,
    PodDisruptionBudgetView,
    workload_of,
)

__all__ = [
    "ClusterView",
    "EvictionPlan",
    "EvictionRecord",
    "LabelRequirement",
    "LabelSelector",
    "NodeClass",
    "NodeKind",
    "PlannedEviction",
    "PlannerMemory",
    "PodDisruptionBudgetView",
    "SkippedPod",
    "observe_round",
    "plan",
    "recheck",
    "render_plan",
    "workload_of",
]


@dataclass
class PlannerMemory:
    """What the loop keeps between runs: consecutive rounds each node was seen hot."""

    hot_rounds: dict[str, int] = field(default_factory=dict)


def observe_round(memory: PlannerMemory, classes: Mapping[str, NodeClass]) -> PlannerMemory:
    """Debounce bookkeeping: the counts to pass to the next ``plan``."""
    return PlannerMemory({name: c.hot_rounds for name, c in classes.items() if c.hot})


def plan(
    cluster: ClusterView,
    config: DeschedulerConfig,
    policy: Policy,
    now_s: float,
    hot_rounds: Mapping[str, int],
) -> EvictionPlan:
    """One planning pass (placeholder until the planner lands: plans nothing)."""
    return EvictionPlan(notes=["the planner is not implemented yet: nothing is evicted"])


def recheck(
    eviction: PlannedEviction,
    cluster_now: ClusterView,
    config: DeschedulerConfig,
    policy: Policy,
    now_s: float,
    reserved: Mapping[str, Resources],
) -> str | None:
    """None when the eviction is still right against a live view; else why not."""
    return "the planner is not implemented yet"
