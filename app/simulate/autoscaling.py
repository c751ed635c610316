"""The ``+autoscaler`` policies: a node autoscaler beside the scheduler and descheduler.

It decides as the cluster autoscaler and Karpenter do, by **requests** only (neither
reads usage: REFERENCE.md section 11), on the scenario's ``autoscaler`` settings over a
preset's defaults:

================================ ==================== =====================
setting                          cluster-autoscaler   karpenter
================================ ==================== =====================
scaleDownUtilizationThreshold    0.5                  1 (WhenEmptyOrUnderutilized)
scaleDownUnneeded                10m                  0s (consolidateAfter)
scaleDownDelayAfterAdd           10m                  0s
scaleUpAfterPending              0s                   0s
provisioningDelay                3m                   2m
================================ ==================== =====================

Each step, after pods are scheduled, the autoscaler looks at the cluster (the step's
**scale-up** first, then **scale-down**, as the cluster autoscaler's loop).

**Scale-down**: a node is *unneeded* when it runs
no pod but DaemonSet pods, or when its pods request less than the threshold of its
allocatable (the larger of CPU and memory, DaemonSet pods counted, as the cluster
autoscaler counts by default) and every other pod on it may move and fits on the other
nodes by requests. A pod may not move when it opted out
(``cluster-autoscaler.kubernetes.io/safe-to-evict: "false"``,
``karpenter.sh/do-not-disrupt: "true"``), has no controller (``kind: Pod``) or its PDB
allows no disruption now; a node annotated
``cluster-autoscaler.kubernetes.io/scale-down-disabled: "true"`` or
``karpenter.sh/do-not-disrupt: "true"`` is never removed. A node unneeded for
``scaleDownUnneeded``, and not within ``scaleDownDelayAfterAdd`` of a scale-up, is removed:
every empty one at once, and one with pods at a time (both autoscalers drain one
non-empty node at a time). Its pods are evicted (``Eviction.by`` ``autoscaler``) and
recreated pending, placed at the next step; DaemonSet pods go with the node and come
back pending too (the simulator has no per-node DaemonSet). The count never falls
below ``minNodes``. A node that came up for pending pods (or a drained node taken back
for them) is no candidate in the step it came up, before they had a scheduling pass:
the pods are nominated to it, as both autoscalers hold (without it, Karpenter's
``consolidateAfter: 0s`` removed each new node before its pods landed, and a scale-up
never ended).

**Scale-up**: the pods pending for
``scaleUpAfterPending`` that fit no running node by requests (a pod held back by a load
filter alone fits one, and, as in a real cluster, wakes no node: autoscaler#506) are
packed, first fit, into the nodes already provisioning and then into new ones, each from
the template of a removed node it fits (the scenario's node groups, in order). A new node
takes pods ``provisioningDelay`` later, and costs from the decision on.

A node that is not running is hidden from placement by a request no pod fits beside
(``_ABSENT``); the run records how many nodes ran (or were provisioning) at each step,
which the summary turns into node-hours.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from app.load import fits_requests
from app.simulate.scenario import AutoscalerPreset, AutoscalerSpec
from app.simulate.scheduling import PodShape

if TYPE_CHECKING:
    from app.simulate.cluster import ClusterState

BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]

SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
SCALE_DOWN_DISABLED = "cluster-autoscaler.kubernetes.io/scale-down-disabled"

# What a node that is not running "requests": no pod fits beside it. Finite, so that
# taking it off again leaves the node's own (zero) requests, not NaN.
_ABSENT = PodShape(1e12, 0.0)


@dataclass(frozen=True, slots=True)
class AutoscalerSettings:
    preset: AutoscalerPreset
    utilization_threshold: float
    unneeded_s: float
    delay_after_add_s: float
    scale_up_after_pending_s: float
    provisioning_delay_s: float
    min_nodes: int


_PRESETS: dict[str, tuple[float, float, float, float, float]] = {
    # threshold, unneeded, delay after add, pending before scale-up, provisioning
    "cluster-autoscaler": (0.5, 600.0, 600.0, 0.0, 180.0),
    "karpenter": (1.0, 0.0, 0.0, 0.0, 120.0),
}


def settings_of(spec: AutoscalerSpec | None) -> AutoscalerSettings:
    """The scenario's settings over its preset's defaults."""
    spec = spec if spec is not None else AutoscalerSpec.model_validate({})
    threshold, unneeded, after_add, pending, provisioning = _PRESETS[spec.preset]

    def pick(value: float | None, default: float) -> float:
        return default if value is None else value

    return AutoscalerSettings(
        preset=spec.preset,
        utilization_threshold=pick(spec.scale_down_utilization_threshold, threshold),
        unneeded_s=pick(spec.scale_down_unneeded_s, unneeded),
        delay_after_add_s=pick(spec.scale_down_delay_after_add_s, after_add),
        scale_up_after_pending_s=pick(spec.scale_up_after_pending_s, pending),
        provisioning_delay_s=pick(spec.provisioning_delay_s, provisioning),
        min_nodes=spec.min_nodes,
    )


def opted_out(annotations: dict[str, str]) -> bool:
    """The autoscalers read their exact values ("false", "true"), as the descheduler's
    planner does (``app/rebalance/victims.py``): a "False" keeps a pod from neither."""
    return annotations.get(SAFE_TO_EVICT) == "false" or annotations.get(DO_NOT_DISRUPT) == "true"


def node_scale_down_disabled(annotations: dict[str, str]) -> bool:
    return (
        annotations.get(SCALE_DOWN_DISABLED) == "true" or annotations.get(DO_NOT_DISRUPT) == "true"
    )


class SimulatedAutoscaler:
    """Scale-down and scale-up of the simulated cluster's nodes, by requests."""

    def __init__(self, cluster: ClusterState) -> None:
        self._cluster = cluster
        scenario = cluster.scenario
        self.settings = settings_of(scenario.autoscaler)
        nodes = len(cluster.node_names)
        self.running = np.ones(nodes, dtype=np.bool_)  # bound pods may run there
        self.ready_at_s = np.full(nodes, math.nan)  # provisioning until then
        self.unneeded_since_s = np.full(nodes, math.nan)
        # When a node came up (or a drained one was taken back) for pending pods: it
        # is no scale-down candidate before they had a scheduling pass (module doc).
        self.joined_s = np.full(nodes, -math.inf)
        # Drained by loadaware's consolidation: tainted so that nothing lands there,
        # until the autoscaler removes it, a scale-up needs it, or the drain is abandoned.
        self.cordoned_at_s = np.full(nodes, math.nan)
        self.last_scale_up_s = -math.inf
        self.scale_ups = 0
        self.scale_downs = 0
        self.disabled = np.array(
            [
                node_scale_down_disabled(group.annotations)
                for group in scenario.nodes
                for _ in group.node_names
            ],
            dtype=np.bool_,
        )
        workloads = scenario.workloads
        self.daemon = np.array([w.kind == "DaemonSet" for w in workloads], dtype=np.bool_)
        self.movable = np.array(
            [w.kind != "Pod" and not opted_out(w.annotations) for w in workloads],
            dtype=np.bool_,
        )

    def step(self, t_s: float) -> None:
        """After the step's scheduling: the nodes ready by the next step take pods,
        pods that fit no running node wake new ones, unneeded nodes go (their pods are
        placed at the next step), and the counts are recorded."""
        cluster = self._cluster
        next_s = t_s + cluster.scenario.step_s
        for node in np.flatnonzero(self.ready_at_s <= next_s + 1e-9).tolist():
            self.ready_at_s[node] = math.nan
            self.running[node] = True
            self.joined_s[node] = t_s
            cluster.requests.add(node, _ABSENT, -1.0)
        self._scale_up(t_s)
        self._scale_down(t_s)
        abandoned = self.cordoned_at_s <= t_s - self.abandon_after_s
        for node in np.flatnonzero(abandoned & self.running).tolist():
            self.uncordon(node)  # the autoscaler did not take it: pods may land again
        run = cluster.run
        run.nodes_up.append(self.nodes_paid_for)
        run.pods_bound.append(int(np.count_nonzero(cluster.node_of >= 0)))

    @property
    def abandon_after_s(self) -> float:
        """How long a drained node waits for the autoscaler before the taint goes."""
        return 2 * self.settings.unneeded_s + 600.0

    def cordon(self, node: int, t_s: float) -> None:
        """Consolidation's taint: no pod lands on ``node`` while it drains."""
        if self.running[node] and np.isnan(self.cordoned_at_s[node]):
            self.cordoned_at_s[node] = t_s
            self._cluster.requests.add(node, _ABSENT)

    def uncordon(self, node: int) -> None:
        if not np.isnan(self.cordoned_at_s[node]):
            self.cordoned_at_s[node] = math.nan
            self._cluster.requests.add(node, _ABSENT, -1.0)

    @property
    def usable(self) -> BoolArray:
        """Nodes running and not drained by consolidation."""
        usable: BoolArray = self.running & np.isnan(self.cordoned_at_s)
        return usable

    @property
    def nodes_paid_for(self) -> int:
        return int(np.count_nonzero(self.running | ~np.isnan(self.ready_at_s)))

    # -- scale-down ----------------------------------------------------------------------
    def _scale_down(self, t_s: float) -> None:
        cluster, settings = self._cluster, self.settings
        node_of = cluster.node_of
        workload_of = cluster.usage.workload_of
        bound = np.flatnonzero(node_of >= 0)
        movers = bound[~self.daemon[workload_of[bound]]]  # pods that must find a new node
        movers_on = np.bincount(node_of[movers], minlength=len(self.running))
        requests = cluster.requests
        share = np.maximum(
            requests.requested_cpu / cluster.allocatable_cpu,
            requests.requested_memory / cluster.allocatable_memory,
        )
        candidate = self.running & ~self.disabled & (self.joined_s < t_s - 1e-9)
        empty = candidate & (movers_on == 0)
        low = candidate & ~empty & (share < settings.utilization_threshold)
        unneeded = empty.copy()
        for node in np.flatnonzero(low).tolist():
            slots = movers[node_of[movers] == node]
            if self._may_leave(slots, t_s) and self._fit_elsewhere(slots, {node}):
                unneeded[node] = True
        newly = unneeded & np.isnan(self.unneeded_since_s)
        self.unneeded_since_s[newly] = t_s
        self.unneeded_since_s[~unneeded] = math.nan
        if t_s - self.last_scale_up_s < settings.delay_after_add_s:
            return
        ripe = unneeded & (t_s - self.unneeded_since_s >= settings.unneeded_s - 1e-9)
        room = int(np.count_nonzero(self.running)) - settings.min_nodes
        for node in np.flatnonzero(ripe & empty).tolist():
            if room <= 0:
                return
            self._remove(node, t_s)
            room -= 1
        for node in np.flatnonzero(ripe & ~empty).tolist():  # one drained node a step
            if room <= 0:
                return
            slots = movers[node_of[movers] == node]
            gone = set(np.flatnonzero(~self.running).tolist())
            if self._may_leave(slots, t_s) and self._fit_elsewhere(slots, gone | {node}):
                self._remove(node, t_s)
                return

    def _may_leave(self, slots: npt.NDArray[np.int64], t_s: float) -> bool:
        cluster = self._cluster
        workloads = cluster.usage.workload_of[slots]
        if not bool(np.all(self.movable[workloads])):
            return False
        for workload, leaving in zip(*np.unique(workloads, return_counts=True), strict=True):
            allowed = cluster.disruptions_allowed(int(workload), t_s)
            if allowed is not None and allowed < int(leaving):
                return False
        return True

    def _fit_elsewhere(self, slots: npt.NDArray[np.int64], excluded: set[int]) -> bool:
        """Whether every pod fits, by requests, on the running nodes but ``excluded``."""
        cluster = self._cluster
        requests = cluster.requests
        open_nodes = self.running.copy()
        open_nodes[list(excluded)] = False
        cpu, memory = requests.requested_cpu.copy(), requests.requested_memory.copy()
        shapes = cluster.shapes
        for workload in cluster.usage.workload_of[slots].tolist():
            shape = shapes[workload]
            fits = open_nodes & fits_requests(
                cluster.allocatable_cpu, cluster.allocatable_memory, cpu, memory,
                shape.request_cpu_cores, shape.request_memory_bytes,
            )  # fmt: skip
            found = np.flatnonzero(fits)
            if not len(found):
                return False
            node = int(found[0])
            cpu[node] += shape.request_cpu_cores
            memory[node] += shape.request_memory_bytes
        return True

    def _remove(self, node: int, t_s: float) -> None:
        cluster = self._cluster
        for slot in np.flatnonzero(cluster.node_of == node).tolist():
            cluster.evict(slot, t_s, by="autoscaler")
        self.running[node] = False
        self.unneeded_since_s[node] = math.nan
        if np.isnan(self.cordoned_at_s[node]):
            cluster.requests.add(node, _ABSENT)
        self.cordoned_at_s[node] = math.nan  # the node is gone, and its taint with it
        self.scale_downs += 1

    # -- scale-up ------------------------------------------------------------------------
    def _scale_up(self, t_s: float) -> None:
        cluster, settings = self._cluster, self.settings
        waiting = cluster.pending(t_s)
        if not len(waiting):
            return
        waited = t_s - cluster.created_at_s[waiting] >= settings.scale_up_after_pending_s - 1e-9
        waiting = waiting[waited]
        requests = cluster.requests
        provisioning = np.flatnonzero(~np.isnan(self.ready_at_s)).tolist()
        room = {
            node: [cluster.allocatable_cpu.item(node), cluster.allocatable_memory.item(node)]
            for node in provisioning
        }
        unschedulable: set[int] = set()  # workloads found fitting a running node
        for workload in cluster.usage.workload_of[waiting].tolist():
            shape = cluster.shapes[workload]
            if workload in unschedulable:
                pass
            elif bool(np.any(requests.fits(shape) & self.running)):
                continue  # held back by something but requests: no node helps (autoscaler#506)
            unschedulable.add(workload)
            cpu, memory = shape.request_cpu_cores, shape.request_memory_bytes
            home = next(
                (n for n, r in room.items() if r[0] >= cpu - 1e-9 and r[1] >= memory - 1e-9),
                None,
            )
            if home is None:
                home = self._provision(cpu, memory, t_s)
                if home is None:
                    continue  # no template fits, or every node runs already
                room[home] = [
                    cluster.allocatable_cpu.item(home),
                    cluster.allocatable_memory.item(home),
                ]
            room[home][0] -= cpu
            room[home][1] -= memory

    def _provision(self, cpu: float, memory: float, t_s: float) -> int | None:
        cluster = self._cluster
        drained = self.running & ~np.isnan(self.cordoned_at_s)
        drained &= cluster.allocatable_cpu >= cpu - 1e-9
        drained &= cluster.allocatable_memory >= memory - 1e-9
        if drained.any():  # a node consolidation drained takes pods again at once
            node = int(np.flatnonzero(drained)[0])
            self.uncordon(node)
            self.joined_s[node] = t_s
            return node
        off = ~self.running & np.isnan(self.ready_at_s)
        fits = off & (cluster.allocatable_cpu >= cpu - 1e-9)
        fits &= cluster.allocatable_memory >= memory - 1e-9
        found = np.flatnonzero(fits)
        if not len(found):
            return None
        node = int(found[0])
        self.ready_at_s[node] = t_s + self.settings.provisioning_delay_s
        self.last_scale_up_s = t_s
        self.scale_ups += 1
        return node
