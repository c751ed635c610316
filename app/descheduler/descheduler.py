"""The descheduler's loop: every ``interval``, while this replica leads, one run of
three steps, each in its own module:

1. gather (``gather.py``): the cluster as the run sees it, or why there is none, and
   then nothing is evicted. The Node, Pod and PodDisruptionBudget caches must have
   listed; every pod's real usage comes from one Prometheus query per resource; the
   state (recent evictions and debounce rounds) comes from the one ConfigMap only the
   descheduler may write (``app/kube/state.py``), so that convergence, cooldowns and
   debouncing survive restarts, leader changes and ``--once`` runs, and nobody else
   can steer them. A first run, with no state yet, makes it and acts like any other:
   observing a round first would recover nothing (no release kept its state
   elsewhere) and would leave an already-hot cluster, or a ``--once`` run on a fresh
   install, untouched;
   then the moves whose settleTime has passed are judged (``settled.py``), so that the
   run plans with them;
2. decide (``decide.py``): the plan, from the pure planner in ``app.rebalance``, and
   the debounce counts to remember;
3. act (``act.py``): unless dry-running, write the state, then evict the planned pods
   in order through the Eviction API (PodDisruptionBudgets honoured), each re-checked
   against the live caches just before its call, spaced by ``evictionsPerSecond``,
   written to the state before the next one, and told in an Event;
4. with ``consolidation.enabled``, consolidate (``consolidate.py``): give up the drains
   that no longer hold, taint the nodes to drain, and evict their pods the same way.

This object keeps the loop and the wiring: the caches and the leader-elected service
that runs them, the settings, and the report of the last run.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Callable, Mapping
from typing import Any

from app.descheduler.act import Evictor
from app.descheduler.consolidate import Consolidator
from app.descheduler.decide import decide, rise_of
from app.descheduler.gather import ClusterReader, Skipped, View
from app.descheduler.report import RunReport, RunResult
from app.descheduler.settings import LoopSettings, warn_about_thresholds
from app.descheduler.settled import SettledMoves
from app.descheduler.telemetry import DeschedulerMetrics
from app.kube import (
    WORKLOAD_USAGE_NAME,
    BudgetCache,
    KubeClient,
    NodeCache,
    PodCache,
    StateStore,
    TaintWriter,
    WorkloadUsageStore,
    pod_info,
)
from app.objects import PodInfo
from app.policy import Policy
from app.prom import InstantQuery
from app.rebalance import (
    STOPPED_HELPING,
    DemandHistory,
    DeschedulerConfig,
    EvictionPlan,
    PlannerState,
    pool_of,
    state_window_s,
)
from app.runtime import (
    InForce,
    LeaderElectedService,
    LeadershipNotAcquired,
)

# RunReport and RunResult are what a run returns: callers take them from here.
__all__ = ["Descheduler", "LoopSettings", "RunReport", "RunResult"]

log = logging.getLogger(__name__)


def say_overlapping_pools(
    view: View, config: DeschedulerConfig, policy: Policy, said: set[str]
) -> set[str]:
    """Log once per node that two node pools select it, in the configuration or the
    policy: such a node gets the defaults (app/policy/pools.py). Returns what is said
    (``said`` for the next run)."""
    if not config.node_pools and not policy.spec.node_pools:
        return set()
    overlapping: dict[str, str] = {}
    for node in view.cluster.nodes.values():
        in_config = pool_of(config, node).overlap
        in_policy = policy.node_pools.match(node.labels).overlap
        for source, pools in (("configuration", in_config), ("policy", in_policy)):
            if pools:
                overlapping[f"{node.name} {source}"] = ", ".join(pools)
    for key in sorted(overlapping.keys() - said):
        name, source = key.split(" ")
        log.error(
            "node %s is selected by node pools %s of the %s; it is judged by the %s's own "
            "%s until one pool selects it",
            name,
            overlapping[key],
            source,
            source,
            "thresholds" if source == "configuration" else "limits",
        )
    return set(overlapping)


class Descheduler:
    def __init__(
        self,
        config: DeschedulerConfig | InForce[DeschedulerConfig],
        policy: Policy | InForce[Policy],
        client: KubeClient,
        source: InstantQuery,
        settings: LoopSettings | None = None,
        *,
        telemetry: DeschedulerMetrics | None = None,
        clock: Callable[[], float] = time.time,
        health_socket: socket.socket | None = None,  # bound to the health port by main
    ) -> None:
        # The configuration and the policy in force (a bare value: in force for good),
        # read through ``config`` and ``policy`` by every part; each reload is adopted
        # here (``_adopt_config``, ``_adopt_policy``) before it is in force.
        self._config = config if isinstance(config, InForce) else InForce.fixed(config)
        self._policy = policy if isinstance(policy, InForce) else InForce.fixed(policy)
        self.settings = settings if settings is not None else LoopSettings()
        self.telemetry = telemetry if telemetry is not None else DeschedulerMetrics()
        self._config.follow(self._adopt_config, self._count_config_reload)
        self._policy.follow(self._adopt_policy, self.telemetry.policy.reload_result)
        self._clock = clock
        self._prometheus = source
        self.nodes = NodeCache(client)
        self.pods: PodCache[PodInfo] = PodCache(client, pod_info)
        self.budgets = BudgetCache(client)
        self.service = LeaderElectedService(
            "descheduler",
            client,
            caches={"nodes": self.nodes, "pods": self.pods, "pod_disruption_budgets": self.budgets},
            lead=self._lead,
            registry=self.telemetry.registry,
            leader_metric="loadaware_descheduler_is_leader",
            lease=self.settings.lease,
            health_host=self.settings.health_host,
            health_port=self.settings.health_port,
            health_socket=health_socket,
            details=self._details,
        )
        self.store = StateStore(client, self.settings.state_namespace, self.settings.state_name)
        self.reader = ClusterReader(
            self.service,
            self.nodes,
            self.pods,
            self.budgets,
            source,
            self.store,
            self.telemetry,
            clock,
            self.settings.sync_timeout_s,
            WorkloadUsageStore(client, self.settings.state_namespace, WORKLOAD_USAGE_NAME),
        )
        self.evictor = Evictor(
            client,
            self.store,
            self._config,
            self._policy,
            self.reader.refresh,
            self.service,
            self.telemetry,
            clock,
            identity=self.settings.identity,
            max_consecutive_errors=self.settings.max_consecutive_errors,
        )
        self.settled = SettledMoves(source, self.telemetry, self.evictor)
        self.consolidator = Consolidator(
            TaintWriter(client, may_write=self.may_evict),
            self.nodes,
            self.evictor,
            self.telemetry,
        )
        # A dry run never writes the state's round counts, so a dry-run loop keeps its
        # own; without them, debouncing nodes would never be previewed as sources.
        self._dry_rounds = PlannerState()
        self._demand = DemandHistory(0.0, 0.0)  # and in the state (decide.rise_of)
        self._overlapping: set[str] = set()  # "<node> <file>" logged in two node pools
        self._stopped_helping = False  # said once, until a run finds a source not backed off
        self.last_report: RunReport | None = None
        self.runs = 0
        self.telemetry.policy.loaded(clock())

    # -- configuration and leadership ---------------------------------------------

    @property
    def dry_run(self) -> bool:
        return self.settings.dry_run or self.config.dry_run

    @property
    def config(self) -> DeschedulerConfig:
        return self._config.value

    @property
    def policy(self) -> Policy:
        return self._policy.value

    def _adopt_config(self, config: DeschedulerConfig) -> None:
        warn_about_thresholds(config, self.policy)

    def _count_config_reload(self, result: str) -> None:
        self.telemetry.config_reloads.labels(result).inc()

    def _adopt_policy(self, policy: Policy) -> None:
        self.telemetry.policy.loaded(self._clock())
        warn_about_thresholds(self.config, policy)

    def may_evict(self) -> bool:
        return self.service.is_leader

    # -- running ------------------------------------------------------------------

    async def run(self) -> None:
        """Run every ``interval`` while leading, until cancelled; reload the
        configuration and the policy whenever their files change."""
        watched = (self._config, self._policy)
        await self.service.run(tuple(w for w in watched if w.watcher is not None))

    async def run_once(self) -> RunReport:
        """One run (``--once``): start the caches, wait for them, run, stop.

        With leader election on, the run first waits to acquire the Lease, so that a
        CronJob run never evicts beside a running descheduler.
        """
        try:
            return await self.service.run_once(self.run_round, self.settings.sync_timeout_s)
        except LeadershipNotAcquired as missed:
            return self._lease_not_acquired(missed)

    def _lease_not_acquired(self, missed: LeadershipNotAcquired) -> RunReport:
        """Why a single run (--once) did not get the Lease: another holder, or an API
        server that could not be reached (the lease warnings above say how)."""
        lease = missed.lease
        report = RunReport(
            RunResult.NOT_LEADER,
            f"evicting nothing: lease {lease.namespace}/{lease.name} not acquired within "
            f"{missed.waited_s:g}s (--sync-timeout): {missed.why}",
        )
        self.last_report = report
        self.telemetry.runs.labels(report.result.value).inc()
        log.warning("%s", report.message)
        return report

    async def _lead(self) -> None:
        while True:
            started = time.monotonic()
            try:
                await self.run_round()
            except Exception:
                # A bug must not stop descheduling for good; the next run starts afresh.
                log.exception("descheduler run failed unexpectedly; trying again next interval")
                self.telemetry.runs.labels("error").inc()
            await asyncio.sleep(max(0.0, self.config.interval - (time.monotonic() - started)))

    # -- one run ------------------------------------------------------------------

    async def run_round(self) -> RunReport:
        started = time.monotonic()
        with self.telemetry.run_duration.time():
            report = await self._round()
        self.runs += 1
        self.last_report = report
        self.telemetry.runs.labels(report.result.value).inc()
        if report.result is RunResult.OK:
            self.telemetry.last_success.set(self._clock())
        log_at = logging.INFO if report.result is RunResult.OK else logging.WARNING
        log.log(log_at, "run %d (%.1fs): %s", self.runs, time.monotonic() - started, report.message)
        return report

    async def _round(self) -> RunReport:
        """Gather the cluster's view (or why not), decide the plan, act on it."""
        config, policy = self.config, self.policy
        view = await self.reader.gather(config, self.evictor.own_records)
        if isinstance(view, Skipped):
            return view.report()
        dry_run = self.dry_run
        view = await self.settled.judge(view, config, policy, dry_run=dry_run)
        self._overlapping = say_overlapping_pools(view, config, policy, self._overlapping)
        rise = rise_of(self._demand, view, config)
        decision = decide(view, config, policy, self._dry_rounds if dry_run else None, rise)
        self._dry_rounds = decision.dry_rounds
        self.telemetry.record_plan(decision.plan)
        self._say_if_stopped_helping(decision.plan)
        report = await self.evictor.act(view, decision, dry_run=dry_run)
        await self.consolidator.act(view, decision, report, dry_run=dry_run)
        return report

    def _say_if_stopped_helping(self, the_plan: EvictionPlan) -> None:
        """Log once when every hot node is backed off; again only after a run that was not."""
        stopped = STOPPED_HELPING in the_plan.notes
        if stopped and not self._stopped_helping:
            log.warning("%s; it keeps trying, rarely, where it backed off", STOPPED_HELPING)
        self._stopped_helping = stopped

    def _window_s(self) -> float:
        """How far back the state must reach: settling, cooldowns, one more interval."""
        return state_window_s(self.config)

    # -- status -------------------------------------------------------------------

    def status(self) -> Mapping[str, Any]:
        return self.service.status()

    def _details(self) -> Mapping[str, Any]:
        last = self.last_report
        return {
            "dry_run": self.dry_run,
            "runs": self.runs,
            "last_run": {"result": last.result.value, "message": last.message} if last else None,
        }
