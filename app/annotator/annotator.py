"""The annotator's moving parts, wired together and run.

Every replica runs the node cache, the pod watch (bindings), leader election and the
health server (the skeleton ``app.runtime.service`` shares with the descheduler). Only
while it leads does it run the writing loops:

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

Gaining the lease starts both loops with a fresh schedule (every metric syncs at
once); losing it cancels them, and the patcher's leadership check stops any write
still in flight.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Callable, Mapping
from typing import Any

from app.annotator.bindings import BindingObserver, BindingWindows, RecentPods, round_estimates
from app.annotator.class_usage import ClassUsagePublisher
from app.annotator.drained import DrainedNodes
from app.annotator.hotvalue import HotValuePublisher, HotValueWrites
from app.annotator.metric_loop import MetricLoop
from app.annotator.settings import AnnotatorConfig as AnnotatorConfig
from app.annotator.settings import WorkloadUsageTarget as WorkloadUsageTarget
from app.annotator.softtaints import SoftTaintKeeper, limits_any, log_settings
from app.annotator.sync import MetricSync
from app.annotator.telemetry import AnnotatorMetrics
from app.annotator.workload_usage import WorkloadUsagePublisher
from app.kube import (
    AdmissionCheck,
    AnnotationPatcher,
    KubeClient,
    NodeCache,
    PodCache,
    TaintWriter,
    WorkloadUsageStore,
    own_username,
    pod_placement,
)
from app.load import SoftTaintSettings
from app.objects import PodPlacement, format_duration
from app.policy import Policy, PolicyError
from app.prom import InstantQuery
from app.runtime import InForce, LeaderElectedService, LeaderElector

log = logging.getLogger(__name__)

POD_WATCH_GRACE_S = 10.0


class Annotator:
    def __init__(
        self,
        config: AnnotatorConfig,
        client: KubeClient,
        source: InstantQuery,
        *,
        telemetry: AnnotatorMetrics | None = None,
        clock: Callable[[], float] = time.time,
        policy_in_force: InForce[Policy] | None = None,
        health_socket: socket.socket | None = None,  # bound to the health port by main
    ) -> None:
        self.config = config
        self.telemetry = telemetry if telemetry is not None else AnnotatorMetrics(clock=clock)
        self._clock = clock
        self.policy_in_force = policy_in_force or InForce.fixed(config.policy)
        policy = self.policy_in_force.value
        self.periods_s = {entry.name: entry.period_s for entry in policy.spec.sync_policy}
        self.nodes = NodeCache(client)
        self.admission = AdmissionCheck(client, own_username())  # at first leading
        self.windows = BindingWindows(policy.spec.hot_value)
        # Only with soft taints on: the estimate is for their rounds alone.
        self.recent = RecentPods(policy.spec.estimation) if config.soft_taints else None
        self.pod_watch: PodCache[PodPlacement] = PodCache(
            client, pod_placement, while_down="hot values miss bindings until it recovers"
        )
        drained = DrainedNodes.of(client, config.descheduler_state)
        self.observer = BindingObserver(
            self.windows,
            clock,
            on_binding=self.telemetry.binding_observed,
            pod_watch=self.pod_watch,
            recent=self.recent,
            on_bound=drained.bound,
        )
        self.pod_watch.add_listener(self.observer.on_change)
        self.writes = HotValueWrites(config.hot_value_interval_s)
        self.service = LeaderElectedService(
            "annotator",
            client,
            caches={"nodes": self.nodes, "pods": self.pod_watch},
            lead=self._lead,
            registry=self.telemetry.registry,
            leader_metric="loadaware_annotator_is_leader",
            lease=config.lease,
            health_host=config.health_host,
            health_port=config.health_port,
            health_socket=health_socket,
            on_leadership=self._on_leadership,
            details=self._details,
        )
        self.patcher = AnnotationPatcher(
            client,
            concurrency=config.patch_concurrency,
            may_write=self.may_write,
            on_retry=self.telemetry.patch_retried,
        )
        self.sync = MetricSync(
            source,
            self.patcher,
            shape=config.shape,
            telemetry=self.telemetry,
            windows=self.windows,
            pod_watch=self.pod_watch,
            writes=self.writes,
            clock=clock,
        )
        self.soft_taints = SoftTaintKeeper(
            TaintWriter(
                client,
                may_write=self.may_write,
                on_retry=self.telemetry.patch_retried,
            ),
            config.soft_taints or SoftTaintSettings(),
            telemetry=self.telemetry,
            clock=clock,
            drained=drained,
        )
        self.hot_value_publisher = HotValuePublisher(
            self.observer, self.windows, self.writes, self.patcher, self.telemetry, clock
        )
        target = config.workload_usage
        self.workload_usage = (
            WorkloadUsagePublisher(
                source,
                target.queries,
                WorkloadUsageStore(client, target.namespace, target.name),
                self.telemetry,
                clock,
            )
            if target is not None
            else None
        )
        reads = (self.policy_in_force, self.pod_watch, self.nodes)
        self.class_usage = ClassUsagePublisher.of(
            source, target, self.patcher, clock, self.telemetry, reads
        )
        self.metric_loop = MetricLoop(
            self.sync, self.nodes, self.periods_s, first_retry_s=config.first_retry_s, clock=clock
        )
        # Rounds run by each loop: tests wait on these, not on time.
        self.workload_usage_rounds = self.soft_taint_rounds = self.hot_value_rounds = 0
        self.policy_in_force.follow(self.set_policy, self.telemetry.policy.reload_result)
        self.telemetry.policy.loaded(clock())

    # -- leadership -----------------------------------------------------------------

    @property
    def elector(self) -> LeaderElector | None:
        return self.service.elector

    def may_write(self) -> bool:
        return self.service.is_leader

    def _on_leadership(self, leading: bool) -> None:
        if not leading:
            self.metric_loop.stop_leading()
            self.soft_taints.forget()

    @property
    def policy(self) -> Policy:
        return self.policy_in_force.value

    def set_policy(self, policy: Policy) -> None:
        """Adopt a reloaded policy before it is in force, without restarting. One without
        syncPolicy is refused with PolicyError before anything changes (the watcher
        counts a failed reload, and the previous policy stays whole)."""
        periods_s = {entry.name: entry.period_s for entry in policy.spec.sync_policy}
        if not periods_s:
            raise PolicyError(
                f"{policy.source}: the reloaded policy has no syncPolicy entries, so the "
                f"annotator would sync nothing; keeping the previous metrics"
            )
        self.periods_s = periods_s
        self.windows.set_policy(policy.spec.hot_value)
        if self.recent is not None:
            self.recent.set_policy(policy.spec.estimation)
        self.telemetry.policy.loaded(self._clock())
        if self.config.soft_taints is not None and not limits_any(policy):
            log.warning(
                "policy reload: %s limits no metric (no predicate), so soft taints come "
                "off every node",
                policy.source,
            )
        self.metric_loop.set_periods(periods_s)

    # -- running --------------------------------------------------------------------

    async def run(self) -> None:
        """Run until cancelled; on cancellation release the lease and stop the server."""
        policy = self.config.policy
        log.info(
            "annotator starting: policy %s; metrics %s; hot value every %gs; %s",
            policy.source,
            ", ".join(f"{m} every {format_duration(p)}" for m, p in self.periods_s.items()),
            self.config.hot_value_interval_s,
            "leader election on lease "
            f"{self.config.lease.namespace}/{self.config.lease.name} as "
            f"{self.config.lease.identity}"
            if self.config.lease
            else "leader election off (this replica always writes)",
        )
        log_settings(self.config.soft_taints, self.config.soft_taint_interval_s, self.policy)
        in_force = self.policy_in_force
        await self.service.run((in_force,) if in_force.watcher is not None else ())

    async def _lead(self) -> None:
        await self.nodes.wait_synced()
        # The first patches carry hot values only once the pod watch has listed. Should
        # pods be unlistable (RBAC), load annotations still flow after this grace.
        try:
            async with asyncio.timeout(POD_WATCH_GRACE_S):
                await self.pod_watch.wait_synced()
        except TimeoutError:
            log.warning(
                "pod watch not synced after %.0fs; writing load annotations without "
                "node_hot_value until it is (can the annotator list pods?)",
                POD_WATCH_GRACE_S,
            )
        if self.config.soft_taints is None:
            try:
                await self.soft_taints.remove_all(self.nodes.nodes)
            except Exception:
                log.exception("taking the soft taints off failed unexpectedly; carrying on")
        async with asyncio.TaskGroup() as group:
            # Beside the loops: reading the policies must not hold back annotations.
            group.create_task(self.admission.once(), name="admission-check")
            group.create_task(self.metric_loop.run(), name="metric-sync")
            group.create_task(self._hot_value_loop(), name="hot-value")
            if self.config.soft_taints is not None:
                group.create_task(self._soft_taint_loop(), name="soft-taints")
            if self.workload_usage is not None:
                group.create_task(self._workload_usage_loop(), name="workload-usage")
            group.create_task(self.class_usage.run(), name="class-usage")

    async def _workload_usage_loop(self) -> None:
        publisher = self.workload_usage
        assert publisher is not None
        await self.pod_watch.wait_synced()
        while True:
            try:
                await publisher.publish(self.pod_watch.objects.values(), self.nodes.nodes)
            except Exception:
                log.exception("publishing workload usage failed unexpectedly; retrying later")
            self.workload_usage_rounds += 1
            await asyncio.sleep(min(self.periods_s.values()))

    async def _soft_taint_loop(self) -> None:
        while True:
            try:
                # The usage this replica last published, while fresh (the extender's
                # estimate rests on the same document); else requests and limits alone.
                nodes, now_s = self.nodes.nodes, self._clock()
                recent = round_estimates(self.recent, self.workload_usage, nodes, now_s)
                await self.soft_taints.run_round(nodes, self.policy, recent.by_node, recent.left)
                self.telemetry.record_raises(recent.largest_raises)
            except Exception:
                log.exception("a soft-taint round failed unexpectedly; retrying next round")
            self.soft_taint_rounds += 1
            await asyncio.sleep(self.config.soft_taint_interval_s)

    async def _hot_value_loop(self) -> None:
        interval_s = self.config.hot_value_interval_s
        await self.pod_watch.wait_synced()
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self.publish_hot_values()
            except Exception:
                log.exception("publishing hot values failed unexpectedly; retrying next round")
            self.hot_value_rounds += 1

    async def publish_hot_values(self) -> int:
        """One hot-value round; returns the number of nodes written."""
        return await self.hot_value_publisher.publish(self.nodes.nodes)

    # -- status ---------------------------------------------------------------------

    def status(self) -> Mapping[str, Any]:
        return self.service.status()

    def _details(self) -> Mapping[str, Any]:
        return {
            "nodes": len(self.nodes.nodes),
            "bindings_in_window": self.windows.binding_count(),
            "metrics": self.metric_loop.details(),
            "soft_taints": "on" if self.config.soft_taints is not None else "off",
            "workload_usage": self.workload_usage.store.where if self.workload_usage else "off",
        }
