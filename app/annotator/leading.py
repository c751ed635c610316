"""What the annotator does while it leads: its writing loops, each a round, a log line
when a round fails, and a pause.

* the metric loop (``MetricLoop``): whenever metrics fall due, one tick (``MetricSync``);
* the hot-value loop: every ``hot_value_interval_s``, patch the nodes whose hot value
  changed;
* the workload-usage loop (unless ``--no-workload-usage``): every shortest sync
  period of the policy, publish what each workload's running pods use, one pod, into
  one ConfigMap the extender reads (``workload_usage``);
* the class-usage loop: every shortest sync period, while the policy has classes of
  pods, each node's usage by class as ``loadaware.io/class-usage.*`` annotations
  (``class_usage``);
* with soft taints on, the soft-taint loop: every ``soft_taint_interval_s``, judge every
  node from its annotations in the node cache plus the estimate of the pods bound on it
  since its samples (``RecentPods``, the simulator's rule), and put loadaware's taint on
  or off (``softtaints``). Its default period, 15 s, is the hot-value refresh's, the
  period at which the simulated annotator judges. It runs on its own short period
  rather than after each sync: what it decides changes with the clock as well as with
  the annotations (a sample going stale, a hold running out, a pod's estimate aging
  out), and a sync that fails writes nothing to react to. A round with nothing to
  change makes no API call. With soft taints off, leading starts by
  taking the taint off every node that carries it.

``Annotator`` builds the parts and runs ``LeadingLoops.run`` each time it gains the
lease; losing it cancels them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from app.annotator.bindings import RecentPods, round_estimates
from app.annotator.class_usage import ClassUsagePublisher
from app.annotator.hotvalue import HotValuePublisher
from app.annotator.metric_loop import MetricLoop
from app.annotator.settings import AnnotatorConfig
from app.annotator.softtaints import SoftTaintKeeper
from app.annotator.telemetry import AnnotatorMetrics
from app.annotator.workload_usage import WorkloadUsagePublisher
from app.kube import AdmissionCheck, NodeCache, PodCache
from app.objects import PodPlacement
from app.policy import Policy
from app.runtime import InForce

__all__ = ["POD_WATCH_GRACE_S", "LeadingLoops"]

log = logging.getLogger(__name__)

POD_WATCH_GRACE_S = 10.0


class LeadingLoops:
    """The annotator's writing loops over the parts it is given, and the rounds each has
    run (tests wait on these, not on time)."""

    def __init__(
        self,
        config: AnnotatorConfig,
        *,
        nodes: NodeCache,
        pod_watch: PodCache[PodPlacement],
        admission: AdmissionCheck,
        metric_loop: MetricLoop,
        hot_values: HotValuePublisher,
        soft_taints: SoftTaintKeeper,
        recent: RecentPods | None,
        workload_usage: WorkloadUsagePublisher | None,
        class_usage: ClassUsagePublisher,
        policy_in_force: InForce[Policy],
        telemetry: AnnotatorMetrics,
        clock: Callable[[], float],
    ) -> None:
        self._config = config
        self._nodes, self._pod_watch, self._admission = nodes, pod_watch, admission
        self._metric_loop, self._hot_values = metric_loop, hot_values
        self._soft_taints, self._recent = soft_taints, recent
        self._workload_usage, self._class_usage = workload_usage, class_usage
        self._policy_in_force, self._telemetry, self._clock = policy_in_force, telemetry, clock
        self.workload_usage_rounds = self.soft_taint_rounds = self.hot_value_rounds = 0

    async def run(self) -> None:
        """Every loop, until cancelled (the lease lost)."""
        await self._nodes.wait_synced()
        # The first patches carry hot values only once the pod watch has listed. Should
        # pods be unlistable (RBAC), load annotations still flow after this grace.
        try:
            async with asyncio.timeout(POD_WATCH_GRACE_S):
                await self._pod_watch.wait_synced()
        except TimeoutError:
            log.warning(
                "pod watch not synced after %.0fs; writing load annotations without "
                "node_hot_value until it is (can the annotator list pods?)",
                POD_WATCH_GRACE_S,
            )
        if self._config.soft_taints is None:
            try:
                await self._soft_taints.remove_all(self._nodes.nodes)
            except Exception:
                log.exception("taking the soft taints off failed unexpectedly; carrying on")
        async with asyncio.TaskGroup() as group:
            # Beside the loops: reading the policies must not hold back annotations.
            group.create_task(self._admission.once(), name="admission-check")
            group.create_task(self._metric_loop.run(), name="metric-sync")
            group.create_task(self._hot_value_loop(), name="hot-value")
            if self._config.soft_taints is not None:
                group.create_task(self._soft_taint_loop(), name="soft-taints")
            if self._workload_usage is not None:
                group.create_task(self._workload_usage_loop(), name="workload-usage")
            group.create_task(self._class_usage.run(), name="class-usage")

    async def _workload_usage_loop(self) -> None:
        publisher = self._workload_usage
        assert publisher is not None
        await self._pod_watch.wait_synced()
        while True:
            try:
                await publisher.publish(self._pod_watch.objects.values(), self._nodes.nodes)
            except Exception:
                log.exception("publishing workload usage failed unexpectedly; retrying later")
            self.workload_usage_rounds += 1
            await asyncio.sleep(min(self._metric_loop.periods_s.values()))

    async def _soft_taint_loop(self) -> None:
        while True:
            try:
                # The usage this replica last published, while fresh (the extender's
                # estimate rests on the same document); else requests and limits alone.
                nodes, now_s = self._nodes.nodes, self._clock()
                recent = round_estimates(self._recent, self._workload_usage, nodes, now_s)
                policy = self._policy_in_force.value
                await self._soft_taints.run_round(nodes, policy, recent.by_node, recent.left)
                self._telemetry.record_raises(recent.largest_raises)
            except Exception:
                log.exception("a soft-taint round failed unexpectedly; retrying next round")
            self.soft_taint_rounds += 1
            await asyncio.sleep(self._config.soft_taint_interval_s)

    async def _hot_value_loop(self) -> None:
        interval_s = self._config.hot_value_interval_s
        await self._pod_watch.wait_synced()
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self.publish_hot_values()
            except Exception:
                log.exception("publishing hot values failed unexpectedly; retrying next round")
            self.hot_value_rounds += 1

    async def publish_hot_values(self) -> int:
        """One hot-value round; returns the number of nodes written."""
        return await self._hot_values.publish(self._nodes.nodes)
