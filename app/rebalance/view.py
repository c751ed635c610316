"""What the planner is given: a snapshot of the cluster, built by the caller's caches."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from app.objects import (
    EvictionRecord,
    MoveRecord,
    NodeInfo,
    PodDisruptionBudgetView,
    PodInfo,
    Resources,
)

__all__ = ["ClusterView"]


@dataclass(frozen=True, slots=True)
class ClusterView:
    nodes: Mapping[str, NodeInfo]
    pods: Mapping[str, PodInfo]  # key "namespace/name"
    pod_usage: Mapping[str, Resources]  # real usage by pod key; missing: requests stand in
    budgets: Sequence[PodDisruptionBudgetView] = ()
    recent_evictions: Sequence[EvictionRecord] = ()
    # The annotator's workload usage, as the extender follows it (fresh, else empty):
    # one pod's usage per workload key, and how many running pods it was measured on.
    # A destination counts the pods bound there as the extender's estimate does, raised
    # by the same bounds (app.load.estimate, "Bounds"; issue 42).
    workload_usage: Mapping[str, Resources] = field(default_factory=dict)
    workloads_measured: Mapping[str, int] = field(default_factory=dict)
    # The descheduler's moves, judged or pending (app/rebalance/backoff.py reads them).
    moves: Sequence[MoveRecord] = ()
