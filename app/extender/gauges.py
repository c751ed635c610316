"""The extender's gauges that read its parts when Prometheus scrapes: the nodes in the
table and those over a limit, the node cache's age, the pods cached, the reservations
live, the workloads observed, the verdict index answering, and the burst estimates
(``EstimateCollector``). Never read on the request path."""

from __future__ import annotations

from collections.abc import Callable

from app.extender.debug import DebugViews
from app.extender.index import implementation_of
from app.extender.reserve import Reserve
from app.extender.table import NodeTable
from app.extender.telemetry import EstimateCollector, ExtenderMetrics
from app.extender.workload_usage import WorkloadUsageFollower
from app.kube import NodeCache, PodCache
from app.objects import ScheduledPod

__all__ = ["PartGauges"]


class PartGauges:
    """Registers, as it is built, a reading of each part for its gauge (-1 where the
    part is off: no reserve, no pod cache, no follower, no node cache)."""

    def __init__(
        self,
        metrics: ExtenderMetrics,
        table: NodeTable,
        clock: Callable[[], float],
        debug: DebugViews,
        *,
        reserve: Reserve | None,
        workload_usage: WorkloadUsageFollower | None,
        node_cache: NodeCache | None,
        pod_cache: PodCache[ScheduledPod] | None,
    ) -> None:
        self._table, self._clock, self._reserve = table, clock, reserve
        self._workload_usage = workload_usage
        self._node_cache, self._pod_cache = node_cache, pod_cache
        metrics.registry.register(EstimateCollector(debug.unsampled_estimates, debug.pod_estimates))
        metrics.workloads_observed.set_function(self._workloads_observed)
        metrics.nodes_known.set_function(self._nodes_known)
        metrics.nodes_overloaded.set_function(self._count_overloaded)
        metrics.node_cache_age.set_function(self._node_cache_age)
        metrics.verdict_index.labels(implementation=implementation_of(table.index)).set(1)
        metrics.reservations.set_function(self._reservations_live)
        metrics.pods_cached.set_function(self._pods_cached)

    def _nodes_known(self) -> float:
        return float(len(self._table))

    def _workloads_observed(self) -> float:
        return -1.0 if self._workload_usage is None else len(self._workload_usage.workloads)

    def _reservations_live(self) -> float:
        return -1.0 if self._reserve is None else float(self._reserve.reservations)

    def _pods_cached(self) -> float:
        return -1.0 if self._pod_cache is None else float(len(self._pod_cache.objects))

    def _count_overloaded(self) -> float:
        self._table.refresh(self._clock())
        self._table.expire_estimates(self._clock())
        return float(len(self._table.rejected_metric))

    def _node_cache_age(self) -> float:
        age = self._node_cache.age_s() if self._node_cache is not None else None
        return -1.0 if age is None else age
