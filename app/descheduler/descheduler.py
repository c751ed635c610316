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
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from lightkube import AsyncClient

from app.descheduler.telemetry import DeschedulerMetrics
from app.kube import (
    BudgetCache,
    EvictionNotice,
    EvictionOutcome,
    Memory,
    NodeCache,
    PodCache,
    StateStore,
    StateUnreadable,
    evict_pod,
    pod_info,
    record_eviction,
)
from app.objects import EvictionRecord, PodInfo, Resources, workload_of
from app.policy import Policy
from app.prom import (
    BAD_QUERY,
    InstantQuery,
    PodUsageQueries,
    PodUsageUnavailable,
    pod_nodes,
    read_pod_usage,
)
from app.rebalance import (
    ClusterView,
    DeschedulerConfig,
    EvictionPlan,
    PlannedEviction,
    PlannerMemory,
    SkipCode,
    memory_window_s,
    observe_round,
    plan,
    previous_hot_rounds,
    recheck,
    record_hot_rounds,
)
from app.runtime import LeaderElectedService, LeadershipNotAcquired, LeaseSettings, Runnable

log = logging.getLogger(__name__)


class RunResult(StrEnum):
    OK = "ok"
    NOT_LEADER = "not_leader"
    CACHES_NOT_SYNCED = "caches_not_synced"
    PROMETHEUS_DOWN = "prometheus_down"
    BAD_QUERY = "bad_query"  # Prometheus is up, but rejected a pod usage query
    NO_POD_USAGE = "no_pod_usage"
    HISTORY_UNAVAILABLE = "history_unavailable"
    STATE_NOT_SAVED = "state_not_saved"
    LEADERSHIP_LOST = "leadership_lost"
    API_ERRORS = "api_errors"


@dataclass
class RunReport:
    result: RunResult
    message: str = ""
    plan: EvictionPlan | None = None
    outcomes: dict[str, str] = field(default_factory=dict)  # pod key -> outcome or skip reason
    dry_run: bool = False

    @property
    def evicted(self) -> list[str]:
        return [key for key, outcome in self.outcomes.items() if outcome == "evicted"]


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
        self._source = source
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
            details=self._details,
        )
        self.store = StateStore(client, self.settings.state_namespace, self.settings.state_name)
        self._memory = Memory()
        self._evicted_uids: set[str] = set()
        # A dry run never writes the Node's round count, so a dry-run loop keeps its
        # own; without it, debouncing nodes would never be previewed as sources.
        self._dry_rounds = PlannerMemory()
        # By UID: what this process evicted, in case its memory could not be written.
        self._own_records: dict[str, EvictionRecord] = {}
        self.last_report: RunReport | None = None
        self.runs = 0
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

    # -- running ------------------------------------------------------------------

    async def run(self, watchers: tuple[Runnable, ...] = ()) -> None:
        """Run every ``interval`` while leading, until cancelled."""
        await self.service.run(watchers)

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
        config, policy = self.config, self.policy
        if not self.may_evict():
            return RunReport(RunResult.NOT_LEADER, "not the leader: nothing to do")
        try:
            await asyncio.wait_for(self.service.caches_synced(), self.settings.sync_timeout_s)
        except TimeoutError:
            return RunReport(
                RunResult.CACHES_NOT_SYNCED,
                f"caches not synced after {self.settings.sync_timeout_s:g}s "
                f"(nodes {self.nodes.synced}, pods {self.pods.synced}, "
                f"PodDisruptionBudgets {self.budgets.synced}): evicting nothing; can the "
                "descheduler list and watch them?",
            )
        stale = self.service.stale_caches()
        if stale:
            return RunReport(RunResult.CACHES_NOT_SYNCED, f"evicting nothing: {stale}")
        now_s = self._clock()
        queries = PodUsageQueries(config.pod_usage_queries.cpu, config.pod_usage_queries.memory)
        placed = pod_nodes(self.pods.objects.values(), self.nodes.nodes)
        try:
            usage = await read_pod_usage(self._source, queries, placed)
        except PodUsageUnavailable as error:
            if error.reason == BAD_QUERY:
                return RunReport(
                    RunResult.BAD_QUERY,
                    f"evicting nothing: podUsageQueries.{error.resource}: {error}",
                )
            return RunReport(
                RunResult.PROMETHEUS_DOWN, f"Prometheus is down: evicting nothing ({error})"
            )
        for kind, count in usage.dropped.items():
            self.telemetry.invalid_samples.labels(kind).inc(count)
        pods = dict(self.pods.objects)
        if not usage.usage and any(p.phase == "Running" for p in pods.values()):
            return RunReport(
                RunResult.NO_POD_USAGE,
                "Prometheus answered, but with no per-pod usage for any pod: evicting nothing, "
                "since every pod's usage would be a guess from its requests; check that "
                "cAdvisor (the kubelet's /metrics/cadvisor) is scraped and that "
                "podUsageQueries return series labelled namespace and pod",
            )
        since_s = now_s - self._window_s()
        try:
            memory = await self.store.load(now_s, since_s)
        except Exception as error:  # lightkube raises HTTP and transport errors
            detail = (
                f"{self.store.where} is unreadable ({error}); fix or delete it (a new one "
                "starts empty)"
                if isinstance(error, StateUnreadable)
                else f"cannot read {self.store.where} ({error}); the descheduler needs "
                "'get' on configmaps in its namespace"
            )
            return RunReport(
                RunResult.HISTORY_UNAVAILABLE,
                f"{detail}: evicting nothing, since without its memory pods just moved "
                "could be moved again",
            )
        memory.evictions.update(
            (r.uid, r) for r in self._own_records.values() if r.evicted_at_s >= since_s
        )
        self._memory = memory
        recent = memory.recent(since_s)
        nodes = dict(self.nodes.nodes)
        view = ClusterView(
            nodes=nodes,
            pods=pods,
            pod_usage=usage.usage,
            budgets=tuple(self.budgets.budgets.values()),
            recent_evictions=recent,
        )
        hot_rounds = previous_hot_rounds(memory.hot_rounds, now_s, config.interval)
        if self.dry_run:
            for name, count in self._dry_rounds.hot_rounds.items():
                hot_rounds[name] = max(hot_rounds.get(name, 0), count)
        the_plan = plan(view, config, policy, now_s, hot_rounds)
        self._dry_rounds = (
            observe_round(self._dry_rounds, the_plan.node_classes)
            if self.dry_run
            else PlannerMemory()
        )
        self._publish_classes(the_plan)
        for skipped in the_plan.skipped:
            self.telemetry.pods_skipped.labels(skipped.code.value).inc()
        report = RunReport(RunResult.OK, plan=the_plan, dry_run=self.dry_run)
        if self.dry_run:
            report.message = (
                f"dry run: {len(the_plan.evictions)} evictions planned, none made; "
                + "; ".join(the_plan.notes)
            ).rstrip("; ")
            return report
        memory.hot_rounds = record_hot_rounds(
            memory.hot_rounds, the_plan.node_classes, now_s, config.interval
        )
        if not await self._save(report):
            return report
        await self._execute(the_plan, view, report)
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

    def _publish_classes(self, the_plan: EvictionPlan) -> None:
        counts: dict[str, int] = {}
        for node_class in the_plan.node_classes.values():
            counts[node_class.kind.value] = counts.get(node_class.kind.value, 0) + 1
        for kind in ("source", "debouncing", "destination", "neutral", "no-data", "excluded"):
            self.telemetry.nodes.labels(kind).set(counts.get(kind, 0))

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
            live = ClusterView(
                nodes=dict(self.nodes.nodes),
                pods=dict(self.pods.objects),
                pod_usage=view.pod_usage,
                budgets=tuple(self.budgets.budgets.values()),
                recent_evictions=view.recent_evictions,
            )
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
