"""The Kubernetes API adapter: the client (``client``), watch caches fed by list and
watch (``cache``, ``listwatch``), and the views and writes of each kind: nodes, pods,
PodDisruptionBudgets, annotation patches, evictions. ``state`` and ``events`` are the
descheduler's memory as the API holds it (a ConfigMap, Events); ``permissions`` lists
every API call each component makes, the list RBAC is checked against.

The ConfigMaps' defaults load at once; the rest (the Kubernetes client, lightkube and
httpx: a few tenths of a second) on first use, so that a command that stops at a bad flag,
or prints its help, never pays for them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.kube.defaults import STATE_NAME as DEFAULT_NAME
from app.kube.defaults import WORKLOAD_USAGE_MAX_AGE_S, WORKLOAD_USAGE_NAME
from app.objects import load_on_use

if TYPE_CHECKING:
    from app.kube.cache import WatchCache
    from app.kube.client import KubeConfigError, make_client
    from app.kube.events import EvictionNotice, record_eviction, record_outcomes
    from app.kube.eviction import EvictionOutcome, evict_pod
    from app.kube.nodes import NodeCache, NodeInfo, node_info
    from app.kube.patching import AnnotationPatcher, PatchOutcome, PatchReport, TaintWriter
    from app.kube.pdbs import BudgetCache, budget_view, label_selector
    from app.kube.pods import PodCache, pod_info, pod_key, pod_placement, scheduled_pod
    from app.kube.state import Memory, StateStore, StateUnreadable
    from app.kube.workload_usage import PublishedUsage, WorkloadUsageStore, WorkloadUsageUnreadable

__all__ = [
    "DEFAULT_NAME",
    "WORKLOAD_USAGE_MAX_AGE_S",
    "WORKLOAD_USAGE_NAME",
    "AnnotationPatcher",
    "BudgetCache",
    "EvictionNotice",
    "EvictionOutcome",
    "KubeConfigError",
    "Memory",
    "NodeCache",
    "NodeInfo",
    "PatchOutcome",
    "PatchReport",
    "PodCache",
    "PublishedUsage",
    "StateStore",
    "StateUnreadable",
    "TaintWriter",
    "WatchCache",
    "WorkloadUsageStore",
    "WorkloadUsageUnreadable",
    "budget_view",
    "evict_pod",
    "label_selector",
    "make_client",
    "node_info",
    "pod_info",
    "pod_key",
    "pod_placement",
    "record_eviction",
    "record_outcomes",
    "scheduled_pod",
]

# Each name loaded on first use, with its module (PEP 562).
__getattr__ = load_on_use(
    __name__,
    {
        "cache": ("WatchCache",),
        "client": ("KubeConfigError", "make_client"),
        "events": ("EvictionNotice", "record_eviction", "record_outcomes"),
        "eviction": ("EvictionOutcome", "evict_pod"),
        "nodes": ("NodeCache", "NodeInfo", "node_info"),
        "patching": ("AnnotationPatcher", "PatchOutcome", "PatchReport", "TaintWriter"),
        "pdbs": ("BudgetCache", "budget_view", "label_selector"),
        "pods": ("PodCache", "pod_info", "pod_key", "pod_placement", "scheduled_pod"),
        "state": ("Memory", "StateStore", "StateUnreadable"),
        "workload_usage": ("PublishedUsage", "WorkloadUsageStore", "WorkloadUsageUnreadable"),
    },
    globals(),
)
