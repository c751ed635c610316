"""The Kubernetes API adapter: the client (``client``), watch caches fed by list and
watch (``cache``, ``listwatch``), and the views and writes of each kind: nodes, pods,
PodDisruptionBudgets, annotation patches, evictions. ``state`` and ``events`` are the
descheduler's memory as the API holds it (a ConfigMap, Events); ``permissions`` lists
every API call each component makes, the list RBAC is checked against.
"""

from app.kube.cache import WatchCache
from app.kube.client import KubeConfigError, make_client
from app.kube.events import EvictionNotice, record_eviction
from app.kube.eviction import EvictionOutcome, evict_pod
from app.kube.nodes import NodeCache, NodeInfo, node_info
from app.kube.patching import AnnotationPatcher, PatchOutcome, PatchReport, TaintWriter
from app.kube.pdbs import BudgetCache, budget_view, label_selector
from app.kube.pods import PodCache, pod_info, pod_key, pod_placement, scheduled_pod
from app.kube.state import DEFAULT_NAME, Memory, StateStore, StateUnreadable
from app.kube.workload_usage import DEFAULT_MAX_AGE_S as WORKLOAD_USAGE_MAX_AGE_S
from app.kube.workload_usage import DEFAULT_NAME as WORKLOAD_USAGE_NAME
from app.kube.workload_usage import (
    PublishedUsage,
    WorkloadUsageStore,
    WorkloadUsageUnreadable,
)

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
    "scheduled_pod",
]
