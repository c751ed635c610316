"""Publishing each node's usage by class of pods (a policy's ``spec.classes``,
``app/policy/classes.py``).

One round, on the leader only, on the policy's shortest sync period, and only while the
policy has classes (a policy without them costs a round nothing):

1. gather: the running pods of the pod watch that have a node and a class (their
   ``spec.priority`` and labels), with the names their node goes by;
2. measure: both per-pod usage queries, each once for the whole cluster (the workload
   usage's queries, ``app.prom.read_pod_usage``), keeping a pod's series only from its
   own node (issue 28, attack 4);
3. decide: ``app.load.class_usage``: per node and class, what the class's pods use, a
   fraction of the node's allocatable (0 where none runs), clamped to 0..1;
4. act: one merge patch per node of ``loadaware.io/class-usage.<class>.cpu`` and
   ``.memory``, each ``"<usage 0..1>,<UTC time>"`` as every load annotation: at most two
   keys per class and ``MAX_CLASSES`` classes, so a node carries at most 16 of them.

A failed query writes nothing: the values age out of their freshness window (the
shortest sync period plus 5 minutes) and the extender fails open on them, as on any
stale metric. Only the annotator may write these keys (the admission policies in
``deploy/components/annotator-admission-policy``; docs/security.md): a kubelet cannot
report its node's production as idle to draw batch pods.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping

from app.annotator.settings import WorkloadUsageTarget
from app.annotator.telemetry import AnnotatorMetrics
from app.kube import AnnotationPatcher, NodeCache, NodeInfo, PatchOutcome, PodCache
from app.load import class_usage, class_usage_annotations, format_usage
from app.objects import PodPlacement
from app.policy import Policy, pod_classes
from app.prom import InstantQuery, PodUsageQueries, PodUsageUnavailable, read_pod_usage
from app.runtime import InForce

log = logging.getLogger(__name__)


def classed_pods(
    pods: Iterable[PodPlacement], nodes: Mapping[str, NodeInfo], policy: Policy
) -> tuple[dict[str, str], dict[str, str], dict[str, tuple[str, ...]]]:
    """(pod -> class, pod -> node, pod -> the names its node goes by) for the running pods
    with a node and a class."""
    classes = pod_classes(policy)
    class_of: dict[str, str] = {}
    node_of: dict[str, str] = {}
    names: dict[str, tuple[str, ...]] = {}
    for pod in pods:
        if not pod.running or pod.node_name is None or not pod.pod:
            continue
        name = classes.class_of(pod.priority, pod.labels)
        if name is None:
            continue
        class_of[pod.pod], node_of[pod.pod] = name, pod.node_name
        node = nodes.get(pod.node_name)
        address = node.internal_ip if node is not None else None
        names[pod.pod] = (pod.node_name, address) if address else (pod.node_name,)
    return class_of, node_of, names


class ClassUsagePublisher:
    """One publishing round at a time (module doc)."""

    def __init__(
        self,
        source: InstantQuery,
        queries: PodUsageQueries,
        patcher: AnnotationPatcher,
        clock: Callable[[], float],
        telemetry: AnnotatorMetrics | None = None,
        *,
        cluster: tuple[InForce[Policy], PodCache[PodPlacement], NodeCache] | None = None,
    ) -> None:
        """``cluster``, what ``run`` reads each round: the policy in force, the pod
        watch and the node cache (None: ``publish`` alone is called)."""
        self._cluster = cluster
        self._telemetry = telemetry
        self._source = source
        self._queries = queries
        self._patcher = patcher
        self._clock = clock
        self._failing = False  # log a failure once, and its recovery
        self.rounds = 0  # rounds run by ``run``: tests wait on this, not on time

    @classmethod
    def of(
        cls,
        source: InstantQuery,
        target: WorkloadUsageTarget | None,
        patcher: AnnotationPatcher,
        clock: Callable[[], float],
        telemetry: AnnotatorMetrics,
        cluster: tuple[InForce[Policy], PodCache[PodPlacement], NodeCache],
    ) -> ClassUsagePublisher:
        """The publisher with the workload usage's queries (its defaults when that is off)."""
        queries = (target or WorkloadUsageTarget("")).queries
        return cls(source, queries, patcher, clock, telemetry, cluster=cluster)

    async def run(self) -> None:
        """Every shortest sync period of the policy in force, one round (a round without
        classes does nothing: a reload may add them). Runs while the annotator leads."""
        assert self._cluster is not None, "run needs the cluster it reads"
        in_force, pod_watch, nodes = self._cluster
        await pod_watch.wait_synced()
        while True:
            try:
                await self.publish(in_force.value, pod_watch.objects.values(), nodes.nodes)
            except Exception:
                log.exception("publishing usage by class failed unexpectedly; retrying later")
            self.rounds += 1
            await asyncio.sleep(min(e.period_s for e in in_force.value.spec.sync_policy))

    async def publish(
        self, policy: Policy, pods: Iterable[PodPlacement], nodes: Mapping[str, NodeInfo]
    ) -> int | None:
        """Measure and write; the number of nodes written, None if nothing was (no
        classes, or the query failed)."""
        classes = pod_classes(policy)
        if not classes:
            return None
        class_of, node_of, names = classed_pods(pods, nodes, policy)
        try:
            measured = await read_pod_usage(self._source, self._queries, names)
        except PodUsageUnavailable as error:
            self._count("query_error")
            if not self._failing:
                log.warning(
                    "usage by class not published: %s; the nodes' class usage goes stale "
                    "and the extender fails open on it",
                    error,
                )
                self._failing = True
            return None
        if self._failing:
            log.info("usage by class published again")
            self._failing = False
        allocatable = {name: node.allocatable for name, node in nodes.items()}
        fractions = class_usage(measured.usage, class_of, node_of, allocatable, classes.policies)
        now_s = self._clock()

        def written(value: float) -> str:
            return format_usage(value, now_s)

        patches = {
            node: class_usage_annotations(per_class, written)
            for node, per_class in fractions.items()
        }
        report = await self._patcher.patch_nodes(patches)
        self._count("ok")
        return sum(1 for outcome in report.outcomes.values() if outcome is PatchOutcome.WRITTEN)

    def _count(self, result: str) -> None:
        if self._telemetry is not None:
            self._telemetry.class_usage_rounds.labels(result).inc()
