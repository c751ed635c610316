"""The Kubernetes API adapter, the one part of loadaware that talks to the API server
(an import-linter contract in pyproject.toml holds it so): the client (``client``) and
what its errors mean (``api_errors``), the commands' one-off reads (``reads``), the
leader election's Lease (``lease``), watch caches fed by list and
watch (``cache``, ``listwatch``), and the views and writes of each kind: nodes, pods,
PodDisruptionBudgets, annotation patches, evictions. ``state`` and ``events`` are the
descheduler's memory as the API holds it (a ConfigMap, Events); ``permissions`` lists
every API call each component makes, the list RBAC is checked against.

The ConfigMaps' defaults load at once; the rest (the Kubernetes client, lightkube and
httpx: a few tenths of a second) on first use, so that a command that stops at a bad flag,
or prints its help, never pays for them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.kube.defaults import (
    DESCHEDULER_CONFIGMAP,
    POLICY_CONFIGMAP,
    WORKLOAD_USAGE_MAX_AGE_S,
    WORKLOAD_USAGE_NAME,
    OwnConfig,
)
from app.kube.defaults import STATE_NAME as DEFAULT_NAME
from app.objects import load_on_use

if TYPE_CHECKING:
    from app.kube.admission import (
        AdmissionCheck,
        admission_problems,
        log_admission_problems,
        own_username,
    )
    from app.kube.api_errors import ClusterUnreadable, describe_api_error
    from app.kube.cache import WatchCache
    from app.kube.client import KubeClient, KubeConfigError, make_client
    from app.kube.events import HELD_HOT_REASON, EvictionNotice, record_eviction, record_node_event
    from app.kube.eviction import EvictionOutcome, evict_pod
    from app.kube.lease import LeaseRecord, LeaseStore, LeaseUnavailable, ReadLease
    from app.kube.nodes import NodeCache, NodeInfo, node_info
    from app.kube.patching import AnnotationPatcher, PatchOutcome, PatchReport, TaintWriter
    from app.kube.pdbs import BudgetCache, budget_view, label_selector
    from app.kube.pods import PodCache, pod_info, pod_key, pod_placement, scheduled_pod
    from app.kube.reads import ClusterReader, Pod, pod_from_mapping
    from app.kube.state import Memory, StateStore, StateUnreadable
    from app.kube.workload_usage import PublishedUsage, WorkloadUsageStore, WorkloadUsageUnreadable

__all__ = [
    "DEFAULT_NAME",
    "DESCHEDULER_CONFIGMAP",
    "HELD_HOT_REASON",
    "POLICY_CONFIGMAP",
    "WORKLOAD_USAGE_MAX_AGE_S",
    "WORKLOAD_USAGE_NAME",
    "AdmissionCheck",
    "AnnotationPatcher",
    "BudgetCache",
    "ClusterReader",
    "ClusterUnreadable",
    "EvictionNotice",
    "EvictionOutcome",
    "KubeClient",
    "KubeConfigError",
    "LeaseRecord",
    "LeaseStore",
    "LeaseUnavailable",
    "Memory",
    "NodeCache",
    "NodeInfo",
    "OwnConfig",
    "PatchOutcome",
    "PatchReport",
    "Pod",
    "PodCache",
    "PublishedUsage",
    "ReadLease",
    "StateStore",
    "StateUnreadable",
    "TaintWriter",
    "WatchCache",
    "WorkloadUsageStore",
    "WorkloadUsageUnreadable",
    "admission_problems",
    "budget_view",
    "describe_api_error",
    "evict_pod",
    "label_selector",
    "log_admission_problems",
    "make_client",
    "node_info",
    "own_username",
    "pod_from_mapping",
    "pod_info",
    "pod_key",
    "pod_placement",
    "record_eviction",
    "record_node_event",
    "scheduled_pod",
]

# Each name loaded on first use, with its module (PEP 562).
__getattr__ = load_on_use(
    __name__,
    {
        "admission": (
            "AdmissionCheck",
            "admission_problems",
            "log_admission_problems",
            "own_username",
        ),
        "api_errors": ("ClusterUnreadable", "describe_api_error"),
        "cache": ("WatchCache",),
        "client": ("KubeClient", "KubeConfigError", "make_client"),
        "events": ("HELD_HOT_REASON", "EvictionNotice", "record_eviction", "record_node_event"),
        "eviction": ("EvictionOutcome", "evict_pod"),
        "lease": ("LeaseRecord", "LeaseStore", "LeaseUnavailable", "ReadLease"),
        "nodes": ("NodeCache", "NodeInfo", "node_info"),
        "patching": ("AnnotationPatcher", "PatchOutcome", "PatchReport", "TaintWriter"),
        "pdbs": ("BudgetCache", "budget_view", "label_selector"),
        "pods": ("PodCache", "pod_info", "pod_key", "pod_placement", "scheduled_pod"),
        "reads": ("ClusterReader", "Pod", "pod_from_mapping"),
        "state": ("Memory", "StateStore", "StateUnreadable"),
        "workload_usage": ("PublishedUsage", "WorkloadUsageStore", "WorkloadUsageUnreadable"),
    },
    globals(),
)
