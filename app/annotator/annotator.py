"""The annotator's moving parts, wired together and run.

Every replica runs the node cache, the pod watch (bindings), leader election and the
health server (the skeleton ``app.runtime.service`` shares with the descheduler). Only
while it leads does it run the writing loops of ``leading`` (metrics, hot values,
workload usage, class usage, soft taints).

Gaining the lease starts the loops with a fresh schedule (every metric syncs at
once); losing it cancels them, and the patcher's leadership check stops any write
still in flight.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable, Mapping
from typing import Any

from app.annotator.bindings import BindingObserver, BindingWindows, RecentPods
from app.annotator.class_usage import ClassUsagePublisher
from app.annotator.drained import DrainedNodes
from app.annotator.hotvalue import HotValuePublisher, HotValueWrites
from app.annotator.leading import LeadingLoops
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
            pods=self.pod_watch,  # for the warm taint (app/annotator/warm_taints.py)
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
        self.loops = LeadingLoops(
            config,
            nodes=self.nodes,
            pod_watch=self.pod_watch,
            admission=self.admission,
            metric_loop=self.metric_loop,
            hot_values=HotValuePublisher(
                self.observer, self.windows, self.writes, self.patcher, self.telemetry, clock
            ),
            soft_taints=self.soft_taints,
            recent=self.recent,
            workload_usage=self.workload_usage,
            class_usage=self.class_usage,
            policy_in_force=self.policy_in_force,
            telemetry=self.telemetry,
            clock=clock,
        )
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
        await self.loops.run()

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
