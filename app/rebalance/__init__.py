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
- ``victims``: protections, the autoscalers' opt-outs and order;
- ``attribution``: a source's excess attributed to the pods above their requests
  (what pods within theirs may relieve, and the node's report when they may not);
- ``fit``: node selector, affinity, taints; ``placement``: inter-pod affinity and
  topology spread for a replacement;
- ``destinations``: where an evicted pod can go;
- ``limits``: the run's guards (per node, namespace, workload, PDB);
- ``outcome``: what the planner returns; ``plan``: the orchestration;
- ``consolidation``: the nodes to drain for a node autoscaler to remove;
  ``drain_taint``: the taint that marks a node being drained, and since when;
  ``packing_rooms``: its destinations, fullest first, and the floor's totals;
- ``render``: the dry-run table;
- ``aftermath``: settleTime after a move, whether it helped; ``backoff``: where
  recent moves did not help, the nodes and workloads left alone.

The configuration, the outcome's types and the small rules load at once; the planner
itself (``plan``, ``beside``, ``render``: numpy and the load model, about a tenth of a
second) on first use, so that reading a configuration or a scenario, or stopping at a
bad one, never pays for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.objects import load_on_use
from app.rebalance.aftermath import (
    NOISE_SHARE,
    Judgement,
    Measured,
    Outcome,
    Planned,
    judge,
    judged_move,
)
from app.rebalance.agreement import threshold_conflicts
from app.rebalance.backoff import MAX_BACKOFF_ROUNDS, SITUATION_CHANGE, BackOff, back_off
from app.rebalance.config import (
    DEFAULT_CPU_QUERY,
    DEFAULT_MEMORY_QUERY,
    ConfigError,
    DeschedulerConfig,
    SchedulerBeside,
    config_from_mapping,
    config_from_yaml,
    memory_window_s,
    pool_of,
)
from app.rebalance.debounce import previous_hot_rounds, record_hot_rounds
from app.rebalance.fit import fit_refusal
from app.rebalance.outcome import (
    STOPPED_HELPING,
    EvictionPlan,
    HeldHot,
    NodeClass,
    NodeKind,
    PlannedEviction,
    SkipCode,
    SkippedPod,
)
from app.rebalance.victims import (
    DO_NOT_DISRUPT_ANNOTATION,
    NODE_HINT_VALUES,
    POD_HINT_VALUES,
    hints_of,
    node_opt_out,
)
from app.rebalance.view import ClusterView

if TYPE_CHECKING:
    from app.rebalance.beside import ASSUMES
    from app.rebalance.consolidation import (
        ConsolidationPlan,
        KeptNode,
        NodeDrain,
        plan_consolidation,
    )
    from app.rebalance.drain_taint import DRAIN_TAINT_KEY, drain_taint, draining_nodes
    from app.rebalance.plan import PlannerMemory, observe_round, plan, recheck
    from app.rebalance.render import render_consolidation, render_plan
    from app.rebalance.rise import DemandHistory, demand_of

__all__ = [
    "ASSUMES",
    "DEFAULT_CPU_QUERY",
    "DEFAULT_MEMORY_QUERY",
    "DO_NOT_DISRUPT_ANNOTATION",
    "DRAIN_TAINT_KEY",
    "MAX_BACKOFF_ROUNDS",
    "NODE_HINT_VALUES",
    "NOISE_SHARE",
    "POD_HINT_VALUES",
    "SITUATION_CHANGE",
    "STOPPED_HELPING",
    "BackOff",
    "ClusterView",
    "ConfigError",
    "ConsolidationPlan",
    "DemandHistory",
    "DeschedulerConfig",
    "EvictionPlan",
    "HeldHot",
    "Judgement",
    "KeptNode",
    "Measured",
    "NodeClass",
    "NodeDrain",
    "NodeKind",
    "Outcome",
    "Planned",
    "PlannedEviction",
    "PlannerMemory",
    "SchedulerBeside",
    "SkipCode",
    "SkippedPod",
    "back_off",
    "config_from_mapping",
    "config_from_yaml",
    "demand_of",
    "drain_taint",
    "draining_nodes",
    "fit_refusal",
    "hints_of",
    "judge",
    "judged_move",
    "memory_window_s",
    "node_opt_out",
    "observe_round",
    "plan",
    "plan_consolidation",
    "pool_of",
    "previous_hot_rounds",
    "recheck",
    "record_hot_rounds",
    "render_consolidation",
    "render_plan",
    "threshold_conflicts",
]

# Each name loaded on first use, with its module (PEP 562). ``plan`` is the name of a
# module and of the function it holds: load_on_use sets the function over the module as
# the module loads, so import the module itself only through this front.
__getattr__ = load_on_use(
    __name__,
    {
        "beside": ("ASSUMES",),
        "consolidation": ("ConsolidationPlan", "KeptNode", "NodeDrain", "plan_consolidation"),
        "drain_taint": ("DRAIN_TAINT_KEY", "drain_taint", "draining_nodes"),
        "plan": ("PlannerMemory", "observe_round", "plan", "recheck"),
        "render": ("render_consolidation", "render_plan"),
        "rise": ("DemandHistory", "demand_of"),
    },
    globals(),
)
