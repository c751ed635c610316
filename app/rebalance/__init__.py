"""The real-load descheduling planner: pure functions from a cluster view to a plan.

No I/O and no client: the descheduler loop (``app/descheduler``) and the simulator
build a ``ClusterView`` from their caches and call ``plan``. Modules, one job each,
in the order a plan is made:

- ``view``: what the planner is given (``ClusterView``);
- ``config``: the configuration schema (the descheduler reads the file);
- ``agreement``: whether its thresholds and the scheduler's load filter agree;
- ``usage``: where a pod's usage comes from (Prometheus, or its requests);
- ``measure``: each node's usage per resource, through the load model;
- ``convergence``: usage the samples do not show yet;
- ``classes``: node classes; ``debounce``: the consecutive hot rounds kept between
  runs, for the descheduler's memory and the simulator alike;
- ``victims``: protections and order;
- ``fit``: node selector, affinity, taints; ``placement``: inter-pod affinity and
  topology spread for a replacement;
- ``destinations``: where an evicted pod can go;
- ``limits``: the run's guards (per node, namespace, workload, PDB);
- ``outcome``: what the planner returns; ``plan``: the orchestration;
- ``render``: the dry-run table.
"""

from app.rebalance.agreement import threshold_conflicts
from app.rebalance.beside import ASSUMES
from app.rebalance.config import (
    DEFAULT_CPU_QUERY,
    DEFAULT_MEMORY_QUERY,
    ConfigError,
    DeschedulerConfig,
    SchedulerBeside,
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
    "ASSUMES",
    "DEFAULT_CPU_QUERY",
    "DEFAULT_MEMORY_QUERY",
    "ClusterView",
    "ConfigError",
    "DeschedulerConfig",
    "EvictionPlan",
    "NodeClass",
    "NodeKind",
    "PlannedEviction",
    "PlannerMemory",
    "SchedulerBeside",
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
