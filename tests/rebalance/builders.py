"""Small builders for planner tests: nodes with fresh load annotations, and pods."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from app.load.samples import format_usage
from app.objects.budgets import PodDisruptionBudgetView
from app.objects.evictions import EvictionRecord
from app.objects.nodes import NodeInfo, Taint
from app.objects.pods import OwnerRef, PodInfo
from app.objects.resources import Resources
from app.policy import default_policy
from app.rebalance.config import DeschedulerConfig, config_from_mapping
from app.rebalance.view import ClusterView

NOW = 1_700_000_000.0
GI = 2.0**30
POLICY = default_policy()
CORES = 10.0


def load_annotations(cpu: float, mem: float = 0.3, *, age_s: float = 30.0,
                cpu_1h: float | None = None) -> dict[str, str]:
    at = NOW - age_s
    return {
        "cpu_usage_avg_5m": format_usage(cpu, at),
        "cpu_usage_max_avg_1h": format_usage(cpu if cpu_1h is None else cpu_1h, at),
        "cpu_usage_max_avg_1d": format_usage(cpu, at),
        "mem_usage_avg_5m": format_usage(mem, at),
        "mem_usage_max_avg_1h": format_usage(mem, at),
        "mem_usage_max_avg_1d": format_usage(mem, at),
    }


def node(name: str, cpu: float, mem: float = 0.3, *, labels: Mapping[str, str] | None = None,
         taints: Sequence[Taint] = (), unschedulable: bool = False, ready: bool = True,
         raw: Mapping[str, str] | None = None, age_s: float = 30.0,
         cpu_1h: float | None = None) -> NodeInfo:
    return NodeInfo(
        name=name,
        annotations=dict(raw) if raw is not None else load_annotations(cpu, mem, age_s=age_s,
                                                                    cpu_1h=cpu_1h),
        internal_ip=None,
        labels=MappingProxyType(dict(labels or {})),
        taints=tuple(taints),
        allocatable=Resources(CORES, 64 * GI),
        unschedulable=unschedulable,
        ready=ready,
    )


def pod(name: str, node_name: str, *, namespace: str = "default", owner: str | None = "rs",
        owner_kind: str = "ReplicaSet", cpu: float = 0.5, created_s: float = NOW - 3600,
        **fields: Any) -> PodInfo:
    values: dict[str, Any] = {
        "namespace": namespace,
        "name": name,
        "uid": f"uid-{namespace}-{name}",
        "node_name": node_name,
        "phase": "Running",
        "ready": True,
        "terminating": False,
        "created_s": created_s,
        "qos": "Burstable",
        "requests": Resources(cpu, 1 * GI),
        "owner": OwnerRef(owner_kind, owner, f"uid-{owner}") if owner else None,
    }
    values.update(fields)
    return PodInfo(**values)


# The per-workload limits wide open, so that tests of other rules can move several pods
# of one ReplicaSet; the tests of those limits set them.
OPEN_WORKLOAD_LIMITS = {"maxMigratingPerWorkload": 100, "maxUnavailablePerWorkload": "100%"}


def config(**fields: Any) -> DeschedulerConfig:
    """Debounce off and the per-workload limits open, unless ``fields`` say otherwise."""
    document: dict[str, Any] = {"consecutiveHotRounds": 1, **OPEN_WORKLOAD_LIMITS, **fields}
    return config_from_mapping(document)


def cluster(nodes: Sequence[NodeInfo], pods: Sequence[PodInfo],
            usage: Mapping[str, Resources] | None = None,
            budgets: Sequence[PodDisruptionBudgetView] = (),
            recent: Sequence[EvictionRecord] = ()) -> ClusterView:
    by_key = {p.key: p for p in pods}
    measured = dict(usage) if usage is not None else {p.key: p.requests for p in pods}
    return ClusterView({n.name: n for n in nodes}, by_key, measured, budgets, recent)
