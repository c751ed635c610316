"""Publishing what each workload's running pods use, one pod (README "Burst-aware
estimation", ``app/kube/workload_usage.py``).

One round, on the leader only, on the policy's shortest sync period (the simulator
publishes on the same grid, ``app/simulate/workload_usage.py``):

1. gather: the running pods of the pod watch that have a node and a controller, each
   with its workload key and the names its node goes by (name and InternalIP);
2. measure: both per-pod usage queries, each once for the whole cluster
   (``app.prom.read_pod_usage``; the descheduler's default queries), keeping a pod's
   series only from its own node (issue 28, attack 4);
3. decide: per workload, ``app.load.workload_per_pod_usage`` of its pods' usage,
   ordered by how many pods it runs (the document keeps the first ``MAX_WORKLOADS``);
4. act: one write of the ConfigMap.

A failed query or write writes nothing: the previous document stays, ages, and the
extender falls back to its request-based estimate once it is stale. A pod is measured
only from its own node's series, and its workload key carries its own namespace, so a
tenant's pods, whatever they use or claim as owner, only ever raise the estimate of
that tenant's own workloads (docs/security.md).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from app.annotator.bindings import Observed
from app.annotator.telemetry import AnnotatorMetrics
from app.kube import (
    WORKLOAD_USAGE_MAX_AGE_S,
    NodeInfo,
    PublishedUsage,
    WorkloadUsageStore,
)
from app.load import MIN_MEASURED_PODS, workload_per_pod_usage
from app.objects import PodPlacement, Resources
from app.prom import InstantQuery, PodUsageQueries, PodUsageUnavailable, read_pod_usage

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PublishedRound:
    """What one round wrote: the workloads and the pods measured for them."""

    workloads: int
    pods: int


def running_pods(
    pods: Iterable[PodPlacement], nodes: Mapping[str, NodeInfo]
) -> tuple[dict[str, str], dict[str, tuple[str, ...]]]:
    """(pod -> workload, pod -> the names its node goes by) for the running pods with a
    node and a controller."""
    workload_of: dict[str, str] = {}
    node_names: dict[str, tuple[str, ...]] = {}
    for pod in pods:
        if not pod.running or pod.node_name is None or pod.workload is None or not pod.pod:
            continue
        workload_of[pod.pod] = pod.workload
        node = nodes.get(pod.node_name)
        address = node.internal_ip if node is not None else None
        node_names[pod.pod] = (pod.node_name, address) if address else (pod.node_name,)
    return workload_of, node_names


def per_workload(
    usage: Mapping[str, Resources], workload_of: Mapping[str, str]
) -> list[tuple[str, Resources, int]]:
    """One pod's usage per workload and how many pods it was measured on, the workloads
    with the most measured pods first. A workload measured on fewer than
    ``MIN_MEASURED_PODS`` is left out: one or two pods' usage is their own word, and
    raises no estimate (``app.load.estimate``, "Bounds")."""
    grouped: dict[str, list[Resources]] = {}
    for pod, resources in usage.items():
        workload = workload_of.get(pod)
        if workload is not None:
            grouped.setdefault(workload, []).append(resources)
    ordered = sorted(grouped.items(), key=lambda item: (-len(item[1]), item[0]))
    published: list[tuple[str, Resources, int]] = []
    for workload, pods in ordered:
        if len(pods) < MIN_MEASURED_PODS:
            continue
        observed = workload_per_pod_usage(pods)
        if observed is not None:
            published.append((workload, observed, len(pods)))
    return published


class WorkloadUsagePublisher:
    """One publishing round at a time (module doc)."""

    def __init__(
        self,
        source: InstantQuery,
        queries: PodUsageQueries,
        store: WorkloadUsageStore,
        telemetry: AnnotatorMetrics,
        clock: Callable[[], float],
    ) -> None:
        self._source = source
        self._queries = queries
        self.store = store
        self._telemetry = telemetry
        self._clock = clock
        self._failing = False  # log a failure once, and its recovery
        self._cut = False  # log once that the document left workloads out
        # The document this replica last wrote, as the extender reads it.
        self.last: PublishedUsage | None = None
        self.max_age_s = WORKLOAD_USAGE_MAX_AGE_S

    def observed(self, now_s: float) -> Observed | None:
        """What one pod of each workload uses, as last published, for the soft-taint
        rule's estimate (``app.annotator.softtaints``); None when nothing was published
        or it is older than ``max_age_s`` (the extender's ``--workload-usage-max-age``
        default): the rule then estimates from requests and limits alone, as the
        extender does from a stale document."""
        last = self.last
        if last is None or now_s - last.published_at_s >= self.max_age_s:
            return None
        return last.observed

    def measured(self, now_s: float) -> Mapping[str, int]:
        """How many running pods each workload's published usage was measured on (the
        bounds on the raise, ``app.load.bounded_raises``); empty when ``observed`` is
        None."""
        last = self.last
        if last is None or now_s - last.published_at_s >= self.max_age_s:
            return {}
        return last.pods

    async def publish(
        self, pods: Iterable[PodPlacement], nodes: Mapping[str, NodeInfo]
    ) -> PublishedRound | None:
        """Measure and write; None if nothing was written (logged, counted)."""
        workload_of, node_names = running_pods(pods, nodes)
        try:
            measured = await read_pod_usage(self._source, self._queries, node_names)
        except PodUsageUnavailable as error:
            self._failed("query_error", str(error))
            return None
        published = per_workload(measured.usage, workload_of)
        now_s = self._clock()
        try:
            self.last = await self.store.publish(published, now_s)
        except Exception as error:  # the API server's answer or a network error
            self._failed("write_error", f"writing {self.store.where} failed: {error}")
            return None
        self._telemetry.workload_usage_rounds.labels("ok").inc()
        # What the document kept: at most MAX_WORKLOADS in its byte budget, in turns by
        # namespace (app/kube/workload_usage.py).
        kept = len(self.last.workloads)
        self._telemetry.workloads_published.set(kept)
        if kept < len(published) and not self._cut:
            log.warning(
                "workload usage: %d of %d workloads kept within %s's bounds (in turns by "
                "namespace); the others' pods are estimated from requests and limits",
                kept, len(published), self.store.where,
            )  # fmt: skip
        self._cut = kept < len(published)
        if self._failing:
            log.info("workload usage: %s written again", self.store.where)
            self._failing = False
        return PublishedRound(kept, len(measured.usage))

    def _failed(self, result: str, why: str) -> None:
        self._telemetry.workload_usage_rounds.labels(result).inc()
        if not self._failing:
            log.warning(
                "workload usage not published: %s; the previous document stays and the "
                "extender estimates from requests and limits once it is stale",
                why,
            )
            self._failing = True
