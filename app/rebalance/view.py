"""What the planner is given: a snapshot of the cluster, built by the caller's caches."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from app.objects.budgets import PodDisruptionBudgetView
from app.objects.evictions import EvictionRecord
from app.objects.nodes import NodeInfo
from app.objects.pods import PodInfo
from app.objects.resources import Resources


@dataclass(frozen=True, slots=True)
class ClusterView:
    nodes: Mapping[str, NodeInfo]
    pods: Mapping[str, PodInfo]  # key "namespace/name"
    pod_usage: Mapping[str, Resources]  # real usage by pod key; missing: requests stand in
    budgets: Sequence[PodDisruptionBudgetView] = ()
    recent_evictions: Sequence[EvictionRecord] = ()
