"""The ground floor: pure values every other floor shares.

Quantities and resources, durations, the views of nodes, pods and
PodDisruptionBudgets, label selectors, eviction records and the one pod-demand rule.
Frozen dataclasses and pure functions; nothing here imports anything else of the
project, so policy, load, kube, prom, rebalance and every component can build on it.

The durations (which every command's flags parse) and ``load_on_use`` load at once; the
views and the rules on first use, so that a command that stops at a bad flag, or prints
its help, does not make their dataclasses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.objects.durations import (
    MAX_DURATION_S,
    MIN_DURATION_S,
    duration_range_problem,
    format_duration,
    parse_duration_s,
)
from app.objects.lazy import load_modules_on_use, load_on_use

if TYPE_CHECKING:
    from app.objects.budgets import (
        PodDisruptionBudgetView,
    )
    from app.objects.demand import (
        NO_DEMAND,
        Demand,
        container_demand,
        effective_demand,
        requests_and_limits,
    )
    from app.objects.evictions import (
        EvictionRecord,
        MoveRecord,
    )
    from app.objects.nodes import (
        NodeInfo,
        Taint,
    )
    from app.objects.pods import (
        TEMPLATE_HASH_LABEL,
        NodeSelectorRequirement,
        NodeSelectorTerm,
        OwnerRef,
        PodAffinityTerm,
        PodInfo,
        PodPlacement,
        ScheduledPod,
        SpreadConstraint,
        Toleration,
        workload_key,
        workload_of,
    )
    from app.objects.resources import (
        CPU,
        MEMORY,
        RESOURCES,
        ZERO,
        Resources,
        parse_quantity,
    )
    from app.objects.selectors import (
        LabelRequirement,
        LabelSelector,
    )
    from app.objects.tenant_text import (
        printable,
        valid_owner,
    )

__all__ = [
    "CPU",
    "MAX_DURATION_S",
    "MEMORY",
    "MIN_DURATION_S",
    "NO_DEMAND",
    "RESOURCES",
    "TEMPLATE_HASH_LABEL",
    "ZERO",
    "Demand",
    "EvictionRecord",
    "LabelRequirement",
    "LabelSelector",
    "MoveRecord",
    "NodeInfo",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "OwnerRef",
    "PodAffinityTerm",
    "PodDisruptionBudgetView",
    "PodInfo",
    "PodPlacement",
    "Resources",
    "ScheduledPod",
    "SpreadConstraint",
    "Taint",
    "Toleration",
    "container_demand",
    "duration_range_problem",
    "effective_demand",
    "format_duration",
    "load_modules_on_use",
    "load_on_use",
    "parse_duration_s",
    "parse_quantity",
    "printable",
    "requests_and_limits",
    "valid_owner",
    "workload_key",
    "workload_of",
]

# Each name loaded on first use, with its module (PEP 562).
__getattr__ = load_on_use(
    __name__,
    {
        "budgets": ("PodDisruptionBudgetView",),
        "demand": (
            "NO_DEMAND",
            "Demand",
            "container_demand",
            "effective_demand",
            "requests_and_limits",
        ),
        "evictions": ("EvictionRecord", "MoveRecord"),
        "nodes": (
            "NodeInfo",
            "Taint",
        ),
        "pods": (
            "NodeSelectorRequirement",
            "NodeSelectorTerm",
            "OwnerRef",
            "PodAffinityTerm",
            "PodInfo",
            "PodPlacement",
            "ScheduledPod",
            "SpreadConstraint",
            "TEMPLATE_HASH_LABEL",
            "Toleration",
            "workload_key",
            "workload_of",
        ),
        "resources": (
            "CPU",
            "MEMORY",
            "RESOURCES",
            "ZERO",
            "Resources",
            "parse_quantity",
        ),
        "selectors": (
            "LabelRequirement",
            "LabelSelector",
        ),
        "tenant_text": (
            "printable",
            "valid_owner",
        ),
    },
    globals(),
)
