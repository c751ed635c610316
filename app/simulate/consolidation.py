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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from app.objects import Resources
from app.rebalance import ClusterView, ConsolidationPlan, plan_consolidation
from app.simulate.autoscaling import SimulatedAutoscaler
from app.simulate.descheduling import PlannerRebalancer

if TYPE_CHECKING:
    from app.simulate.cluster import Autoscaler, ClusterState
    from app.simulate.soft_taints import SimulatedSoftTaints


class ConsolidatingRebalancer(PlannerRebalancer):
    """``Rebalancer`` that drains the nodes ``plan_consolidation`` frees."""

    def __init__(
        self, cluster: ClusterState, soft_taints: SimulatedSoftTaints | None, autoscaler: Autoscaler
    ) -> None:
        super().__init__(cluster, soft_taints, autoscaler)
        settings = self.config.consolidation.model_copy(update={"enabled": True})
        self.config = self.config.model_copy(update={"consolidation": settings})
        self.consolidations: list[tuple[float, ConsolidationPlan]] = []

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
        nodes = {
            name: replace(info, unschedulable=True) if name in draining else info
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
        the_plan = plan_consolidation(
            view, self.config, cluster.policy, now_s, draining, pending=pending
        )
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
