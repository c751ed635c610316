"""The simulated cluster: a discrete-time loop over one scenario under one policy.

Each step at time ``t`` runs, in order:

1. the metrics pipeline does whatever is due at ``t`` (it has seen usage up to ``t``),
   and with soft taints the annotator's taint rule runs after a limited metric's sync;
2. on the descheduler's interval, a rebalancing round evicts pods, which are
   recreated at once as pending pods (their controller replaces them);
3. pods created by ``t`` are scheduled, highest priority first, then oldest, and
   the node autoscaler of the ``+autoscaler`` policies acts (``autoscaling``);
4. every bound pod's real usage for ``[t, t + step)`` is computed from its
   workload's profile; a node's demand above its allocatable is throttled CPU or,
   for memory, an OOM event (one per node and step).

Real usage is drawn from the scenario's seed only, per pod slot and step, so every
policy sees the same demand; placements differ, demand does not.

The state (``ClusterState``: nodes, pod slots, pipeline, records) is built first, and
the parts (estimate, load filter, soft taints, rebalancer, autoscaler) on it, each given
the state and the parts it reads; the state refers to none of them, so a run's objects
form no cycle and go when its last user lets them go.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import numpy.typing as npt

from app.load import SPREAD_OWNER_KINDS, ZONE_KEY
from app.objects import Resources
from app.rebalance import ReplacementScheduler
from app.simulate.classes import ClassSide
from app.simulate.collector import fewer_collections
from app.simulate.contention import Binding, NodeLoad, node_load
from app.simulate.disruption import disruptions_allowed
from app.simulate.drained import BindingFeed
from app.simulate.pod_identity import workload_key_of
from app.simulate.pod_shapes import PodShapes
from app.simulate.profiles import SlotUsage
from app.simulate.recording_rules import SimulatedMonitoring, is_due
from app.simulate.scenario import Scenario
from app.simulate.scheduling import NodeRequests, Scheduler, UnsampledUsage, WorkloadSpread
from app.simulate.soft_taints import SimulatedSoftTaints
from app.simulate.workload_usage import SimulatedWorkloadUsage

# 2024-01-01T00:00:00Z: the wall clock at the start of every simulation.
EPOCH_S = 1_704_067_200.0
# A pod of a captured placement (``workload.placement``) was created and bound this
# long before the start: long enough that no estimate or hot value counts it as new.
PRE_BOUND_S = -86_400.0

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Placement:
    t_s: float
    slot: int
    node: int


@dataclass(frozen=True, slots=True)
class Eviction:
    t_s: float
    slot: int
    node: int
    pdb_violation: bool
    by: str = "descheduler"  # or "autoscaler": its scale-down drained the node


@dataclass(frozen=True, slots=True)
class Deletion:
    """A pod its workload no longer wanted (a scale-down by the replica history)."""

    t_s: float
    slot: int
    node: int


class Autoscaler(Protocol):
    """What runs the nodes, after each step's scheduling (``autoscaling``): a node
    autoscaler, or every node all the time; it records the nodes up and pods bound."""

    def step(self, t_s: float) -> None: ...


class Rebalancer(Protocol):
    """One descheduling round: the pod slots to evict now (the planner's seam)."""

    def evictions(self, t_s: float) -> Sequence[int]: ...


class FixedNodes:
    """No autoscaler: every node runs all the time; only the counts are recorded."""

    def __init__(self, cluster: ClusterState) -> None:
        self._cluster = cluster

    def step(self, t_s: float) -> None:
        run = self._cluster.run
        run.nodes_up.append(len(run.node_names))
        run.pods_bound.append(int(np.count_nonzero(self._cluster.node_of >= 0)))


# What steers the scheduler: the descheduler's ``scheduler`` setting, one definition.
Steering = ReplacementScheduler


@dataclass
class PolicyPlan:
    """What one policy is made of: whether the extender filters, and its seams."""

    name: str
    load_aware: bool
    crane: bool = False  # crane-scheduler as it ships (scenario.crane), not the extender
    # The annotator keeps soft taints, which kube-scheduler's TaintToleration scores.
    soft_taints: bool = False
    make_estimate: Callable[[ClusterState], UnsampledUsage] | None = None
    # The annotator publishes each workload's observed per-pod usage, which the
    # extender's estimate of a pod placed through it is raised to (loadaware).
    workload_usage: bool = False
    # Built on the cluster, beside its soft taints (if any) and its autoscaler.
    make_rebalancer: (
        Callable[[ClusterState, SimulatedSoftTaints | None, Autoscaler], Rebalancer] | None
    ) = None
    # A node autoscaler (``autoscaling``): removes unneeded nodes, adds nodes for pods;
    # None: every node runs all the time (``FixedNodes``).
    make_autoscaler: Callable[[ClusterState], Autoscaler] | None = None

    @property
    def steering(self) -> Steering:
        """What steers the scheduler away from hot nodes, which the descheduler works
        beside: a load filter (loadaware's extender, or crane's plugin), soft taints,
        or nothing but requests."""
        if self.load_aware:
            return "extender"
        return "soft-taints" if self.soft_taints else "requests"


@dataclass
class Run:
    """Everything measured in one simulation; ``report`` turns it into numbers."""

    policy: str
    scenario: Scenario
    node_names: list[str]
    times_s: FloatArray
    cpu_utilisation: npt.NDArray[np.float32]  # [step, node] demand / allocatable
    memory_utilisation: npt.NDArray[np.float32]
    throttled_core_s: float = 0.0
    oom_events: int = 0
    placements: list[Placement] = field(default_factory=list)
    evictions: list[Eviction] = field(default_factory=list)
    deletions: list[Deletion] = field(default_factory=list)
    pending_at_end: int = 0
    load_evaluations: int = 0
    pending: list[int] = field(default_factory=list)  # per step, after scheduling
    waits_s: list[float] = field(default_factory=list)  # per placement: created to bound
    # Evictions judged settleTime after their round, and those of them that bought
    # nothing: their source not cooler by what they used, less noise (``gains``).
    evictions_judged: int = 0
    evictions_bought_nothing: int = 0
    # The judged ones by outcome (app/rebalance/aftermath.py): helped, no effect,
    # backfired; the last two are those that bought nothing.
    evictions_helped: int = 0
    evictions_no_effect: int = 0
    evictions_backfired: int = 0
    # Nodes running or provisioning, and pods bound, after each step's scheduling.
    nodes_up: list[int] = field(default_factory=list)
    pods_bound: list[int] = field(default_factory=list)
    # Per workload (``SimulatedCluster(by_workload=True)``, or a policy with classes):
    # the CPU its pods asked for and did not get (core-seconds), and its pods pending
    # after each step's scheduling, summed over the steps (pod-steps).
    throttled_core_s_by_workload: FloatArray | None = None
    pending_steps_by_workload: IntArray | None = None


def workload_spread(scenario: Scenario) -> WorkloadSpread:
    """The system-default topology spread kube-scheduler's default profile scores
    (``WorkloadSpread``): the zone of each node is its group's
    ``topology.kubernetes.io/zone`` label; a Deployment's pods are its ReplicaSet's."""
    zones = [g.labels.get(ZONE_KEY) for g in scenario.nodes for _ in range(g.count)]
    owners = ["ReplicaSet" if w.kind == "Deployment" else w.kind for w in scenario.workloads]
    return WorkloadSpread([kind in SPREAD_OWNER_KINDS for kind in owners], zones)


def allocatable_of(scenario: Scenario) -> tuple[FloatArray, FloatArray]:
    """Each node's allocatable CPU (cores) and memory (bytes), in node order."""
    nodes = [g for g in scenario.nodes for _ in range(g.count)]
    return (
        np.array([g.cpu for g in nodes], dtype=np.float64),
        np.array([g.memory for g in nodes], dtype=np.float64),
    )


class ClusterState:
    """The cluster every part of one simulation reads and changes: its nodes, its pod
    slots and where each is bound, the metrics pipeline and the run's records. It holds
    none of the parts (estimate, filter, taints, rebalancer, autoscaler), which are
    built on it, so that nothing refers back to what refers to it."""

    def __init__(self, scenario: Scenario, plan: PolicyPlan) -> None:
        self.scenario = scenario
        self.plan = plan
        settings = scenario.crane
        policy = scenario.scheduling_policy()
        if plan.crane and settings.missing_data_as_full:
            policy = policy.as_crane_scores()
        self.policy = policy
        hot_value_interval_s = scenario.metrics.hot_value_interval_s
        if plan.crane and settings.hot_value_on_node_sync:
            hot_value_interval_s = scenario.crane_node_sync_s
        self.node_names = scenario.node_names
        self.allocatable_cpu, self.allocatable_memory = allocatable_of(scenario)
        nodes = len(self.node_names)
        self.usage = SlotUsage(scenario)
        slots = self.usage.slots
        self.node_of = np.full(slots, -1, dtype=np.int64)  # -1: pending or not created
        self.created_at_s = self.usage.created_at_s.copy()  # recreation moves it
        self._created_by_s = float(self.created_at_s.max(initial=-math.inf))  # none later
        self.bound_at_s = np.full(slots, math.nan)
        self.pod_shapes = PodShapes(scenario.workloads, policy, estimated=bool(plan.make_estimate))
        self.shapes = self.pod_shapes.shapes  # each workload's, changed in place
        estimation = policy.spec.estimation
        self.workload_usage = (
            SimulatedWorkloadUsage(
                self.usage.workload_of,
                len(scenario.workloads),
                scrape_interval_s=scenario.metrics.scrape_interval_s,
                publish_period_s=min(e.period_s for e in policy.spec.sync_policy),
            )
            if plan.workload_usage and estimation.enabled and estimation.workload_usage
            else None
        )
        self.pipeline = SimulatedMonitoring(
            self.policy,
            nodes,
            epoch_s=EPOCH_S,
            scrape_interval_s=scenario.metrics.scrape_interval_s,
            rule_interval_s=scenario.metrics.rule_interval_s,
            hot_value_interval_s=hot_value_interval_s,
        )
        spread = workload_spread(scenario)  # kube-scheduler's, under every policy
        self.requests = NodeRequests(self.allocatable_cpu, self.allocatable_memory, spread)
        steps = scenario.steps
        self.run = Run(
            plan.name,
            scenario,
            self.node_names,
            np.arange(steps, dtype=np.float64) * scenario.step_s,
            np.zeros((steps, nodes), dtype=np.float32),
            np.zeros((steps, nodes), dtype=np.float32),
        )
        # Slots their workload wants now; only a replica history ever clears one.
        self.wanted = np.ones(slots, dtype=np.bool_)
        self._binding: Binding | None = None  # worked out when needed after node_of changed
        self._bind_captured_placement()

    def _bind_captured_placement(self) -> None:
        """Bind each workload's ``placement`` pods where they ran at the start."""
        index_of = {name: i for i, name in enumerate(self.node_names)}
        for workload_index, workload in enumerate(self.scenario.workloads):
            first = int(self.usage.first_slot[workload_index])
            for offset, node_name in enumerate(workload.placement):
                slot, node = first + offset, index_of[node_name]
                self.node_of[slot] = node
                self._binding = None
                self.bound_at_s[slot] = self.created_at_s[slot] = PRE_BOUND_S
                self.requests.add(node, self.shapes[workload_index], workload=workload_index)
                self.run.placements.append(Placement(PRE_BOUND_S, slot, node))

    def follow_replica_counts(self, t_s: float) -> None:
        """Delete the pods of slots no longer wanted; a slot wanted again gets a new pod."""
        wanted = self.usage.wanted(t_s)
        if wanted is None:
            return
        for slot in np.flatnonzero(self.wanted & ~wanted).tolist():
            node = int(self.node_of[slot])
            if node >= 0:
                self.requests.add(node, self.shapes[w := self.usage.workload_of.item(slot)], -1, w)
                self.node_of[slot] = -1
                self._binding = None
                self.bound_at_s[slot] = math.nan
                self.run.deletions.append(Deletion(t_s, slot, node))
        returning = ~self.wanted & wanted
        self.created_at_s[returning] = np.maximum(self.created_at_s[returning], t_s)
        self._created_by_s = max(self._created_by_s, t_s)
        self.wanted = wanted

    def pending(self, t_s: float) -> IntArray:
        waiting_mask = self.binding().unbound
        if t_s < self._created_by_s:  # else every slot was created by t_s
            waiting_mask = waiting_mask & (self.created_at_s <= t_s)
        if self.usage.varying:  # else every slot is wanted
            waiting_mask = waiting_mask & self.wanted
        waiting: IntArray = waiting_mask.nonzero()[0]
        if not len(waiting):
            return waiting
        priority = self.usage.priority[waiting]
        order = np.lexsort((waiting, self.created_at_s[waiting], -priority))
        return waiting[order]

    def evict(self, slot: int, t_s: float, by: str = "descheduler") -> None:
        node = int(self.node_of[slot])
        if node < 0:
            return
        workload = int(self.usage.workload_of[slot])
        violation = (allowed := self.disruptions_allowed(workload, t_s)) is not None and allowed < 1
        self.requests.add(node, self.shapes[workload], -1.0, workload)
        self.node_of[slot] = -1
        self._binding = None
        self.bound_at_s[slot] = math.nan
        self.created_at_s[slot] = t_s  # the controller recreates it at once
        self._created_by_s = max(self._created_by_s, t_s)
        self.run.evictions.append(Eviction(t_s, slot, node, violation, by))

    def disruptions_allowed(self, workload: int, t_s: float) -> int | None:
        """The workload's PDB ``status.disruptionsAllowed`` at ``t_s`` (None: no PDB)."""
        budget = self.scenario.workloads[workload].pdb
        if budget is None:
            return None
        mine = self.usage.slots_of[workload]
        wanted = (self.usage.created_at_s[mine] <= t_s) & self.wanted[mine]
        return disruptions_allowed(budget, self.node_of[mine] >= 0, wanted)

    def binding(self) -> Binding:
        """Where each slot's pod is bound now (kept until a placement changes)."""
        if self._binding is None:
            self._binding = Binding.of(self.node_of)
        return self._binding

    def place(self, placement: Placement) -> None:
        """Bind ``placement``'s slot on its node."""
        slot, node, t_s = placement.slot, placement.node, placement.t_s
        self.node_of[slot] = node
        self._binding = None
        self.bound_at_s[slot] = t_s
        self.run.waits_s.append(t_s - self.created_at_s.item(slot))
        self.requests.add(node, self.shapes[w := self.usage.workload_of.item(slot)], workload=w)
        self.pipeline.record_binding(node, t_s)
        self.run.placements.append(placement)


class SimulatedCluster:
    """The step loop of one policy: its ``ClusterState`` and the parts built on it."""

    def __init__(
        self,
        scenario: Scenario,
        plan: PolicyPlan,
        on_placement: Callable[[SimulatedCluster, Placement], None] | None = None,
        *,
        by_workload: bool = False,
    ) -> None:
        """``on_placement`` sees each placement before it is made, with the cluster as
        the scheduler saw it (tests); ``by_workload`` measures each workload's throttled
        CPU and pending pods (``Run``), as a policy with classes always does."""
        state = self.state = ClusterState(scenario, plan)
        policy = state.policy
        self.estimate = plan.make_estimate(state) if plan.make_estimate else None
        # Classes of pods (app/simulate/classes.py): a scheduler per class beside this
        # one, which takes the pods in no class with the policy's own load filter.
        self.classes = ClassSide(state, self.estimate, by_workload)
        self.load_filter = self.classes.base_filter()
        keys = [workload_key_of(workload) for workload in scenario.workloads]
        self.soft_taints = (
            SimulatedSoftTaints(
                policy,
                state.pipeline,
                state.node_names,
                estimate=self.estimate,
                node_labels=state.scenario.node_labels,  # for node pools
                requests=state.requests,
                allocatable=[
                    Resources(float(cpu), float(memory))
                    for cpu, memory in zip(
                        state.allocatable_cpu, state.allocatable_memory, strict=True
                    )
                ],
                bindings=BindingFeed(  # the guard's stand-down reads the bindings
                    state.run.placements,
                    [keys[workload] for workload in state.usage.workload_of.tolist()],
                    state.pipeline.epoch_s,
                ),
            )
            if plan.soft_taints
            else None
        )
        self.scheduler = Scheduler(
            state.requests,
            self.load_filter,
            scenario.scheduler.extender_weight,
            np.random.default_rng([scenario.seed, 1]),
            scenario.crane.plugin_weight if plan.crane else 0,
            self.soft_taints.tainted if self.soft_taints is not None else None,
            soft_warm=self.soft_taints.warm.tainted if self.soft_taints is not None else None,
        )
        self.descheduler_interval_s = scenario.descheduler_config().interval
        self.autoscaler = (plan.make_autoscaler or FixedNodes)(state)
        self.rebalancer = (
            plan.make_rebalancer(state, self.soft_taints, self.autoscaler)
            if plan.make_rebalancer
            else None
        )
        self.on_placement = on_placement
        self._load: NodeLoad | None = None

    # -- the loop --------------------------------------------------------------------
    def simulate(self, progress: Callable[[int, int], None] | None = None) -> Run:
        state = self.state
        steps = state.scenario.steps
        with fewer_collections():
            for step in range(steps):
                self.step(step)
                if progress is not None:
                    progress(step + 1, steps)
        state.run.pending_at_end = len(state.pending(steps * state.scenario.step_s))
        if self.load_filter is not None:
            state.run.load_evaluations = self.load_filter.evaluations
        return state.run

    def step(self, step: int) -> None:
        state = self.state
        t_s = step * state.scenario.step_s
        state.pipeline.advance(t_s)
        if state.workload_usage is not None:
            state.workload_usage.advance(t_s, state.binding().bound)
            state.pod_shapes.follow(state.workload_usage)
        if self.soft_taints is not None:
            self.soft_taints.advance(t_s)
        state.follow_replica_counts(t_s)
        if self.rebalancer is not None and step > 0 and is_due(t_s, self.descheduler_interval_s):
            for slot in self.rebalancer.evictions(t_s):
                state.evict(int(slot), t_s)
        state.run.pending.append(self.schedule_pending(t_s))
        self.autoscaler.step(t_s)
        self.run_workloads(step, t_s)

    def schedule_pending(self, t_s: float) -> int:
        """Bind what can be bound of the pods pending at ``t_s``; how many still wait."""
        state = self.state
        unschedulable: set[int] = set()  # workloads that found no node in this step
        pending = state.pending(t_s)
        waiting = len(pending)
        for slot, workload in zip(
            pending.tolist(), state.usage.workload_of[pending].tolist(), strict=True
        ):
            if workload in unschedulable:
                continue  # placements only fill nodes up: it would fail again
            # Its class's scheduler (or this one), its load filter refreshed for ``t_s``.
            scheduler = self.classes.scheduler(workload, t_s, self.scheduler)
            node = scheduler.choose(state.shapes[workload], workload)
            if node is None:
                unschedulable.add(workload)
                continue
            self.bind(slot, node, t_s)
            waiting -= 1
        return waiting

    def bind(self, slot: int, node: int, t_s: float) -> None:
        placement = Placement(t_s, slot, node)
        if self.on_placement is not None:
            self.on_placement(self, placement)  # sees the cluster as the scheduler did
        self.state.place(placement)

    def run_workloads(self, step: int, t_s: float) -> None:
        state = self.state
        cpu, memory = state.usage.at(step, t_s)
        load, binding = self._load, state.binding()
        step_s = state.scenario.step_s
        if load is None or not load.holds(cpu, memory, binding):
            allocatable = (state.allocatable_cpu, state.allocatable_memory)
            with_cpu_got = state.workload_usage is not None or self.classes.measures
            load = node_load(
                binding, cpu, memory, allocatable, step_s, with_cpu_got=with_cpu_got, last=load
            )
            self._load = load
        run = state.run
        run.cpu_utilisation[step] = load.cpu_fraction
        run.memory_utilisation[step] = load.mem_fraction
        run.throttled_core_s += load.throttled_core_s
        run.oom_events += load.oom_events
        if state.workload_usage is not None and load.cpu_got is not None:
            state.workload_usage.account(load.cpu_got, memory, binding.bound, step_s)
        self.classes.account(binding, cpu, memory, load.cpu_got, t_s, step_s)
        state.pipeline.account(load.cpu_seen, load.mem_seen, step_s)
