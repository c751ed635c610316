"""The real-load descheduling planner: pure functions from a cluster view to a plan.

No I/O and no client: the descheduler loop (``app/descheduler``) and the simulator
build a ``ClusterView`` from their caches and call ``plan``. Modules, one job each:
``config`` (the configuration schema; the descheduler reads the file), ``usage``
(where a pod's usage comes from), ``classes`` (node classes and debounce),
``debounce`` (the consecutive hot rounds kept between runs, for the descheduler's
memory and the simulator alike), ``convergence`` (usage the samples do not show yet),
``victims`` (protections and order), ``fit`` (node selector, affinity, taints),
``destinations`` (where an evicted pod can go), ``plan`` (the orchestration) and
``render`` (the dry-run table).
"""

from app.rebalance.agreement import threshold_conflicts
from app.rebalance.config import (
    ConfigError,
    DeschedulerConfig,
    config_from_mapping,
    config_from_yaml,
    memory_window_s,
)
from app.rebalance.debounce import previous_hot_rounds, record_hot_rounds
from app.rebalance.fit import fit_refusal
from app.rebalance.outcome import (
    EvictionPlan,
    NodeClass,
    NodeKind,
    PlannedEviction,
    SkipCode,
    SkippedPod,
)
from app.rebalance.plan import PlannerMemory, observe_round, plan, recheck
from app.rebalance.render import render_plan
from app.rebalance.view import ClusterView

__all__ = [
    "ClusterView",
    "ConfigError",
    "DeschedulerConfig",
    "EvictionPlan",
    "NodeClass",
    "NodeKind",
    "PlannedEviction",
    "PlannerMemory",
    "SkipCode",
    "SkippedPod",
    "config_from_mapping",
    "config_from_yaml",
    "fit_refusal",
    "memory_window_s",
    "observe_round",
    "plan",
    "previous_hot_rounds",
    "recheck",
    "record_hot_rounds",
    "render_plan",
    "threshold_conflicts",
]
