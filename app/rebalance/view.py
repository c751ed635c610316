"""What the planner is given: a snapshot of the cluster, built by the caller's caches."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from app.objects import (
    EvictionRecord,
    MoveRecord,
    NodeInfo,
    PodDisruptionBudgetView,
    PodInfo,
    Resources,
)


@dataclass(frozen=True, slots=True)
class ClusterView:
    nodes: Mapping[str, NodeInfo]
    pods: Mapping[str, PodInfo]  # key "namespace/name"
    pod_usage: Mapping[str, Resources]  # real usage by pod key; missing: requests stand in
    budgets: Sequence[PodDisruptionBudgetView] = ()
    recent_evictions: Sequence[EvictionRecord] = ()
    # The descheduler's moves, judged or pending (app/rebalance/backoff.py reads them).
    moves: Sequence[MoveRecord] = ()
