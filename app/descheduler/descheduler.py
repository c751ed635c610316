"""The descheduler's loop: observe, plan with ``app.rebalance``, then evict one by one.

Every ``interval``, while this replica leads, one run:

1. waits until the Node, Pod and PodDisruptionBudget caches have listed;
2. reads every pod's real usage with one Prometheus query per resource. Prometheus
   down, or answering with no usage for any pod while pods run (cAdvisor not
   scraped, a query that matches nothing), means the run evicts nothing and says
   why: usage the planner cannot see is no reason to move pods. A pod missing from
   an answer that has others falls back to its requests, and the plan says so;
3. reads its memory, recent evictions and debounce rounds, from the one ConfigMap
   only it may write (``app/kube/state.py``), so that convergence, cooldowns and
   debouncing survive restarts, leader changes and ``--once`` runs, and nobody else
   can steer them. If the memory cannot be read, nothing is evicted. A first run, with
   no memory yet, makes it and acts like any other: observing a round first would
   recover nothing (no release kept its memory elsewhere) and would leave an
   already-hot cluster, or a ``--once`` run on a fresh install, untouched;
4. plans, records this round's debounce counts, and, unless dry-running, evicts the
   planned pods in order. Just before each call the eviction is re-checked against
   the live caches (a scale-up may have taken the destination's room), leadership is
   checked, and calls are spaced by ``evictionsPerSecond``. A 429 (PDB) skips the
   pod; repeated API errors end the run, never a retry loop. Each eviction is written
   to the memory before the next one (a run that cannot write it stops), and gets an
   Event, for humans, naming the node, the metric, the values and the destination.

A pod is never evicted twice by one process (its UID is remembered); across
processes the memory says it was.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from lightkube import AsyncClient

from app.descheduler.decide import decide
from app.descheduler.gather import ClusterReader, Skipped
from app.descheduler.report import RunReport, RunResult
from app.descheduler.telemetry import DeschedulerMetrics
from app.kube.events import EvictionNotice, record_eviction
from app.kube.eviction import EvictionOutcome, evict_pod
from app.kube.lease import LeaderElector, LeaseSettings
from app.kube.nodes import NodeCache
from app.kube.pdbs import BudgetCache
from app.kube.pods import PodCache, pod_info
from app.kube.service import LeaderElectedService, Runnable
from app.kube.state import Memory, StateStore
from app.objects.evictions import EvictionRecord
from app.objects.pods import PodInfo, workload_of
from app.objects.resources import Resources
from app.policy import Policy
from app.prom.client import InstantQuery
from app.rebalance.config import DeschedulerConfig, memory_window_s
from app.rebalance.plan import (
    ClusterView,
    EvictionPlan,
    PlannedEviction,
    PlannerMemory,
    SkipCode,
    recheck,
)

# RunReport and RunResult are what a run returns: callers take them from here.
__all__ = ["Descheduler", "LoopSettings", "RunReport", "RunResult"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LoopSettings:
    dry_run: bool = False  # --dry-run; the config's dryRun also counts
    lease: LeaseSettings | None = None  # None: no leader election
    identity: str = "loadaware-descheduler"  # reportingInstance of the Events
    state_namespace: str = "default"  # where its memory lives (the CLI: the pod's namespace)
    state_name: str = "loadaware-descheduler-state"
    health_host: str = "0.0.0.0"
    health_port: int | None = None
    sync_timeout_s: float = 60.0  # how long a run waits for the caches
    max_consecutive_errors: int = 3  # API errors in a row that end a run


class EvictionPacer:
    """Spaces eviction calls ``1 / per_second`` apart."""

    def __init__(self, per_second: float, monotonic: Callable[[], float] = time.monotonic):
        self.per_second = per_second
        self._monotonic = monotonic
        self._next_s = -float("inf")

    async def wait(self) -> None:
        delay_s = self._next_s - self._monotonic()
        if delay_s > 0:
            await asyncio.sleep(delay_s)
        self._next_s = self._monotonic() + 1.0 / self.per_second


def describe_eviction(eviction: PlannedEviction) -> str:
    """The Event message: the node, the metric and values, the pod's usage, the destination."""
    values = ", ".join(f"{name} {value:.3f}" for name, value in eviction.metric_values.items())
    usage = eviction.usage
    return (
        f"Evicted by loadaware descheduler: node {eviction.source} is hot on real usage "
        f"({values}); this pod uses cpu {usage.cpu_cores:.3f} cores and memory "
        f"{usage.memory_bytes / 2**20:.0f} MiB (from {eviction.usage_from}); room was "
        f"reserved on node {eviction.destination}. {eviction.reason}"
    )


class Descheduler:
    def __init__(
        self,
        config: DeschedulerConfig,
        policy: Policy,
        client: AsyncClient,
        source: InstantQuery,
        settings: LoopSettings | None = None,
        *,
        telemetry: DeschedulerMetrics | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.policy = policy
        self.settings = settings if settings is not None else LoopSettings()
        self.telemetry = telemetry if telemetry is not None else DeschedulerMetrics()
        self._client = client
        self._clock = clock
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
            on_leadership=self._on_leadership,
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
        )
        self._memory = Memory()
        self._evicted_uids: set[str] = set()
        # A dry run never writes the Node's round count, so a dry-run loop keeps its
        # own; without it, debouncing nodes would never be previewed as sources.
        self._dry_rounds = PlannerMemory()
        # By UID: what this process evicted, in case its memory could not be written.
        self._own_records: dict[str, EvictionRecord] = {}
        self.last_report: RunReport | None = None
        self.runs = 0
        self._leading = asyncio.Event()
        self.telemetry.policy.loaded(clock())

    # -- configuration and leadership ---------------------------------------------

    @property
    def dry_run(self) -> bool:
        return self.settings.dry_run or self.config.dry_run

    def set_config(self, config: DeschedulerConfig) -> None:
        self.config = config

    def set_policy(self, policy: Policy) -> None:
        self.policy = policy
        self.telemetry.policy.loaded(self._clock())

    def may_evict(self) -> bool:
        return self.service.is_leader

    def _on_leadership(self, leading: bool) -> None:
        if leading:
            self._leading.set()
        else:
            self._leading.clear()

    # -- running ------------------------------------------------------------------

    async def run(self, watchers: tuple[Runnable, ...] = ()) -> None:
        """Run every ``interval`` while leading, until cancelled."""
        await self.service.run(watchers)

    async def run_once(self) -> RunReport:
        """One run (``--once``): start the caches, wait for them, run, stop.

        With leader election on, the run first waits to acquire the Lease, so that a
        CronJob run never evicts beside a running descheduler.
        """
        service = self.service
        service.run_lead_on_leadership = False  # this run is the work
        async with asyncio.TaskGroup() as group:
            service.start_caches(group)
            elector_task = None
            if service.elector is not None:
                elector_task = group.create_task(service.elector.run(), name="leader")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._leading.wait(), self.settings.sync_timeout_s)
            try:
                if service.elector is not None and not service.is_leader:
                    report = self._lease_not_acquired(service.elector)
                else:
                    report = await self.run_round()
            finally:
                for task in service.background:
                    task.cancel()
                if elector_task is not None:
                    elector_task.cancel()
        return report

    def _lease_not_acquired(self, elector: LeaderElector) -> RunReport:
        """Why a single run (--once) did not get the Lease: another holder, or an API
        server that could not be reached (the lease warnings above say how)."""
        lease = elector.settings
        why = (
            f"it is held by {elector.holder}"
            if elector.holder is not None
            else "the API server could not be reached or refused it (see the lease warnings above)"
        )
        report = RunReport(
            RunResult.NOT_LEADER,
            f"evicting nothing: lease {lease.namespace}/{lease.name} not acquired within "
            f"{self.settings.sync_timeout_s:g}s (--sync-timeout): {why}",
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
        config, policy = self.config, self.policy
        view = await self.reader.gather(config, self._own_records)
        if isinstance(view, Skipped):
            return view.report()
        self._memory = view.memory
        dry_run = self.dry_run
        decision = decide(view, config, policy, self._dry_rounds if dry_run else None)
        self._dry_rounds = decision.dry_rounds
        self.telemetry.record_plan(decision.plan)
        the_plan = decision.plan
        report = RunReport(RunResult.OK, plan=the_plan, dry_run=dry_run)
        if dry_run:
            report.message = (
                f"dry run: {len(the_plan.evictions)} evictions planned, none made; "
                + "; ".join(the_plan.notes)
            ).rstrip("; ")
            return report
        view.memory.hot_rounds = decision.hot_rounds
        if not await self._save(report):
            return report
        await self._execute(the_plan, view.cluster, report)
        return report

    def _window_s(self) -> float:
        """How far back the memory must reach: settling, cooldowns, one more interval."""
        return memory_window_s(self.config)

    async def _save(self, report: RunReport) -> bool:
        """Write the memory; on failure end the run (report says why) and return False."""
        now_s = self._clock()
        try:
            await self.store.save(self._memory, now_s, now_s - self._window_s())
        except Exception as error:  # lightkube raises HTTP and transport errors
            report.result = RunResult.STATE_NOT_SAVED
            report.message = (
                f"cannot write {self.store.where} ({error}): stopping this run, since an "
                "eviction it does not remember could be repeated; the descheduler needs "
                "'create' and 'update' on configmaps in its namespace"
            )
            return False
        return True

    async def _execute(self, the_plan: EvictionPlan, view: ClusterView, report: RunReport) -> None:
        pacer = EvictionPacer(self.config.evictions_per_second)
        reserved: dict[str, Resources] = {}
        errors_in_a_row = 0
        started_s = self._clock()
        for eviction in the_plan.evictions:
            key = eviction.pod.key
            if eviction.pod.uid in self._evicted_uids:
                self._skip(
                    report, key, SkipCode.ALREADY_EVICTED, "already evicted by this descheduler"
                )
                continue
            await pacer.wait()
            if not self.may_evict():
                report.result = RunResult.LEADERSHIP_LOST
                break
            live = self.reader.refresh(view)
            why_not = recheck(eviction, live, self.config, self.policy, self._clock(), reserved)
            if why_not is not None:
                self._skip(report, key, SkipCode.RECHECK, f"re-check: {why_not}")
                continue
            result = await evict_pod(
                self._client, eviction.pod.namespace, eviction.pod.name, eviction.pod.uid
            )
            outcome = result.outcome
            self.telemetry.pods_evicted.labels(
                outcome.value, eviction.source, eviction.pod.namespace
            ).inc()
            report.outcomes[key] = outcome.value
            if outcome is EvictionOutcome.ERROR:
                errors_in_a_row += 1
                if errors_in_a_row >= self.settings.max_consecutive_errors:
                    report.result = RunResult.API_ERRORS
                    break
                continue
            errors_in_a_row = 0
            if outcome is EvictionOutcome.BLOCKED_BY_PDB:
                log.info(
                    "pod %s: eviction blocked by its PodDisruptionBudget (%s); skipped",
                    key,
                    result.detail,
                )
            elif outcome is EvictionOutcome.EVICTED:
                await self._after_eviction(eviction, reserved, started_s)
                if not await self._save(report):
                    break
        report.message = self._summary(the_plan, report)

    async def _after_eviction(
        self, eviction: PlannedEviction, reserved: dict[str, Resources], run_started_s: float
    ) -> None:
        self._evicted_uids.add(eviction.pod.uid)
        record = EvictionRecord(
            pod_key=eviction.pod.key,
            uid=eviction.pod.uid,
            node=eviction.source,
            destination=eviction.destination,
            usage=eviction.usage,
            evicted_at_s=self._clock(),
            workload=workload_of(eviction.pod),
        )
        # Pods of one workload evicted together in this run are one move, not a repeat.
        earlier = [
            r
            for r in self._memory.evictions.values()
            if record.workload is not None
            and r.workload == record.workload
            and r.evicted_at_s < run_started_s
            and record.evicted_at_s - r.evicted_at_s < self.config.return_cooldown
        ]
        if earlier:
            self.telemetry.repeated_evictions.inc()
        self._own_records[record.uid] = record
        self._memory.evictions[record.uid] = record
        reserved[eviction.destination] = (
            reserved.get(eviction.destination, Resources()) + eviction.usage
        )
        log.info(
            "evicted pod %s from %s (room reserved on %s)",
            record.pod_key,
            eviction.source,
            eviction.destination,
        )
        notice = EvictionNotice(record, describe_eviction(eviction))
        if not await record_eviction(self._client, notice, self.settings.identity):
            self.telemetry.event_errors.inc()

    def _skip(self, report: RunReport, key: str, code: SkipCode, reason: str) -> None:
        report.outcomes[key] = reason
        self.telemetry.pods_skipped.labels(code.value).inc()
        log.info("pod %s not evicted: %s", key, reason)

    def _summary(self, the_plan: EvictionPlan, report: RunReport) -> str:
        counts: dict[str, int] = {}
        for outcome in report.outcomes.values():
            name = outcome if outcome in set(EvictionOutcome) else "skipped"
            counts[name] = counts.get(name, 0) + 1
        made = ", ".join(f"{n} {name}" for name, n in sorted(counts.items())) or "none"
        text = f"{len(the_plan.evictions)} evictions planned; outcomes: {made}"
        if report.result is RunResult.LEADERSHIP_LOST:
            text += "; leadership lost: stopped before the remaining evictions"
        elif report.result is RunResult.API_ERRORS:
            text += (
                f"; stopped after {self.settings.max_consecutive_errors} API errors in a row, "
                "the next run starts over"
            )
        elif report.result is RunResult.STATE_NOT_SAVED:
            text += "; " + report.message
        notes = "; ".join(the_plan.notes)
        return f"{text}; {notes}" if notes else text

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
