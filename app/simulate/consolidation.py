"""The ``+consolidate`` policies: loadaware's consolidation (``app.rebalance.consolidation``)
beside the simulated node autoscaler.

Every descheduler ``interval`` the adapter builds the same view as the ``+desched``
policies (``descheduling.PlannerRebalancer``), less the nodes the autoscaler is not
running and those consolidation drains already, and asks ``plan_consolidation`` which
nodes to drain; the scenario's ``descheduler.consolidation`` settings apply, switched on.
Each drained node gets loadaware's drain taint (``SimulatedAutoscaler.cordon``: no pod
lands there) and all its pods are evicted at once; the autoscaler then removes it as any
empty node, or takes it back for a scale-up, or the taint goes when the autoscaler has
not taken it (``abandon_after_s``), or when the plan gives the drain up (as the live
descheduler does: the nodes left under ``minSpare``, the pods waiting for a node
counted). The pods pending are handed to the planner as the live view holds them.

Nodes the simulated autoscaler finds unneeded carry the cluster autoscaler's
``DeletionCandidateOfClusterAutoscaler`` taint in the view, its value the Unix time
they became unneeded, as in a real cluster: consolidation counts no room there, and
starts no new drain while the autoscaler removes them. The rise consolidation keeps room for
(``app.rebalance.rise``) comes from a ``DemandHistory`` fed each run, as the live
descheduler's is, with the requests of the pods bound or pending. A live descheduler has
watched the cluster before: the history starts with the scenario's own run before it
(``seed_history``: a diurnal scenario's day is taken as yesterday too, its replica
histories read from ``riseLookback`` before the start, wrapped over the scenario's
duration; a workload without one at its count at the start). ``seed_history = False``
starts it empty, as a descheduler that has just been installed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from app.objects import Resources, Taint
from app.rebalance import ClusterView, ConsolidationPlan, DemandHistory, plan_consolidation
from app.simulate.autoscaling import SimulatedAutoscaler
from app.simulate.descheduling import PlannerRebalancer
from app.simulate.profiles import replicas_wanted

if TYPE_CHECKING:
    from app.simulate.cluster import Autoscaler, ClusterState
    from app.simulate.soft_taints import SimulatedSoftTaints


def _deletion_candidate(since_s: float, cluster: ClusterState) -> Taint:
    at_s = cluster.pipeline.epoch_s + since_s
    return Taint("DeletionCandidateOfClusterAutoscaler", str(int(at_s)), "PreferNoSchedule")


class ConsolidatingRebalancer(PlannerRebalancer):
    """``Rebalancer`` that drains the nodes ``plan_consolidation`` frees."""

    seed_history = True  # the module doc: a day before the scenario, watched

    def __init__(
        self, cluster: ClusterState, soft_taints: SimulatedSoftTaints | None, autoscaler: Autoscaler
    ) -> None:
        super().__init__(cluster, soft_taints, autoscaler)
        settings = self.config.consolidation.model_copy(update={"enabled": True})
        self.config = self.config.model_copy(update={"consolidation": settings})
        self.consolidations: list[tuple[float, ConsolidationPlan]] = []
        workloads = cluster.scenario.workloads
        requests = [w.pod_requests_and_limits[0] for w in workloads]
        needs_node = np.array([w.kind != "DaemonSet" for w in workloads], dtype=np.float64)
        self._request_cpu = np.array([r.cpu_cores for r in requests]) * needs_node
        self._request_memory = np.array([r.memory_bytes for r in requests]) * needs_node
        self.demand = DemandHistory(settings.rise_lookback, settings.rise_within)
        if self.seed_history and settings.rise_lookback > 0:
            self._seed_demand()

    def _seed_demand(self) -> None:
        """The run before the scenario's (module doc), one sample an interval."""
        cluster = self._cluster
        scenario, interval_s = cluster.scenario, self.config.interval
        workloads = scenario.workloads
        at_start = np.bincount(
            cluster.usage.workload_of[cluster.usage.created_at_s <= 0],
            minlength=len(workloads),
        )
        lookback_s = self.demand.lookback_s
        for i in range(math.ceil(lookback_s / interval_s), 0, -1):
            t_s = -i * interval_s
            then_s = t_s % scenario.duration_s
            counts = np.array(
                [
                    replicas_wanted(w, then_s) if w.replica_history else int(at_start[n])
                    for n, w in enumerate(workloads)
                ],
                dtype=np.float64,
            )
            self.demand.record(t_s, self._requests_of(counts))

    def _requests_of(self, counts: npt.NDArray[np.float64]) -> Resources:
        return Resources(
            float(counts @ self._request_cpu), float(counts @ self._request_memory)
        )

    def _record_demand(self, t_s: float) -> None:
        """The requests of the pods bound or waiting for a node now."""
        cluster = self._cluster
        slots = np.concatenate([np.flatnonzero(cluster.node_of >= 0), cluster.pending(t_s)])
        counts = np.bincount(
            cluster.usage.workload_of[slots], minlength=len(self._request_cpu)
        ).astype(np.float64)
        self.demand.record(t_s, self._requests_of(counts))

    def evictions(self, t_s: float) -> Sequence[int]:
        cluster, autoscaler = self._cluster, self._autoscaler
        if not isinstance(autoscaler, SimulatedAutoscaler):
            raise TypeError("consolidation is simulated beside a node autoscaler only")
        now_s = cluster.pipeline.epoch_s + t_s
        view, slot_of = self._view(t_s, now_s)
        running, usable = autoscaler.running.tolist(), autoscaler.usable.tolist()
        index_of = {name: i for i, name in enumerate(cluster.node_names)}
        draining = {name for name in view.nodes if running[index_of[name]]
                    and not usable[index_of[name]]}  # fmt: skip
        # The cluster autoscaler's soft taint on the nodes it finds unneeded (it removes
        # them after scaleDownUnneeded): consolidation counts no room there.
        # Its value is the Unix time it was set, as the cluster autoscaler writes it.
        since_s = autoscaler.unneeded_since_s.tolist()
        nodes = {
            name: replace(info, unschedulable=True)
            if name in draining
            else replace(info, taints=(*info.taints, _deletion_candidate(since_s[i], cluster)))
            if not math.isnan(since_s[i := index_of[name]])
            else info
            for name, info in view.nodes.items()
            if running[index_of[name]]
        }
        view = ClusterView(
            nodes=nodes,
            pods=view.pods,
            pod_usage=view.pod_usage,
            budgets=view.budgets,
            recent_evictions=view.recent_evictions,
        )
        waiting = cluster.pending(t_s)
        shapes = [cluster.shapes[w] for w in cluster.usage.workload_of[waiting].tolist()]
        pending = Resources(
            sum(shape.request_cpu_cores for shape in shapes),
            sum(shape.request_memory_bytes for shape in shapes),
        )
        self._record_demand(t_s)
        the_plan = plan_consolidation(
            view, self.config, cluster.policy, now_s, draining, pending=pending,
            rise=self.demand.rise(),
        )  # fmt: skip
        self.consolidations.append((t_s, the_plan))
        for given_up in the_plan.abandoned:  # the drain no longer holds: pods may land
            autoscaler.uncordon(index_of[given_up.node])
        slots = []
        for drain in the_plan.drains:
            autoscaler.cordon(index_of[drain.node], t_s)
            for eviction in drain.evictions:
                slot = slot_of[eviction.pod.key]
                slots.append(slot)
                self._generation[slot] += 1
                self._records.append(eviction.record(now_s))
        return slots
