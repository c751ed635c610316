"""Gather: the cluster as one run sees it, or why there is no such view.

A run needs four things before it may plan: the lead, caches that have listed (and are
not stale), every pod's real usage from Prometheus, and the descheduler's state. Any
one of them missing means the run evicts nothing, and ``Skipped`` says why in words an
operator can act on:

- Prometheus down, or rejecting a query, is no reason to move pods;
- an answer with no usage for any pod while pods run (cAdvisor not scraped, a query
  that matches nothing) would make every pod's usage a guess from its requests. A pod
  missing from an answer that has others falls back to its requests, and the plan says
  so;
- without its state (``app/kube/state.py``) pods just moved could be moved again. A
  first run, with no state yet, gets an empty one and acts like any other.

The annotator's workload usage (``app/kube/workload_usage.py``) is read too, as the
extender follows it, so that a destination counts the pods bound there as the
extender's estimate does (``ClusterView.workload_usage``; issue 42). It is no reason to
skip a run: missing, unreadable, stale (``WORKLOAD_USAGE_MAX_AGE_S``) or unreachable,
every pod is estimated from its requests and limits, as by the extender then.

What this process evicted itself is added to the state read, in case writing it
failed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from app.descheduler.report import RunReport, RunResult
from app.descheduler.telemetry import DeschedulerMetrics
from app.kube import (
    WORKLOAD_USAGE_MAX_AGE_S,
    BudgetCache,
    DeschedulerState,
    NodeCache,
    PodCache,
    PublishedUsage,
    StateStore,
    StateUnreadable,
    WorkloadUsageStore,
    describe_api_error,
)
from app.objects import EvictionRecord, PodInfo
from app.prom import (
    BAD_QUERY,
    InstantQuery,
    PodUsage,
    PodUsageQueries,
    PodUsageUnavailable,
    pod_nodes,
    read_pod_usage,
)
from app.rebalance import ClusterView, DeschedulerConfig, state_window_s

log = logging.getLogger(__name__)


class Leadership(Protocol):
    """What gathering asks of the leader-elected service that runs the caches."""

    @property
    def is_leader(self) -> bool: ...

    async def caches_synced(self) -> None: ...

    def stale_caches(self) -> str: ...


@dataclass(frozen=True, slots=True)
class View:
    """What a run plans on: the cluster, and the state it reads and then extends."""

    cluster: ClusterView
    state: DeschedulerState
    now_s: float


@dataclass(frozen=True, slots=True)
class Skipped:
    """Why a run has no view, and so evicts nothing."""

    result: RunResult
    message: str

    def report(self) -> RunReport:
        return RunReport(self.result, self.message)


class ClusterReader:
    """Reads a run's view from the caches, Prometheus and the state's ConfigMap."""

    def __init__(
        self,
        leadership: Leadership,
        nodes: NodeCache,
        pods: PodCache[PodInfo],
        budgets: BudgetCache,
        prometheus: InstantQuery,
        store: StateStore,
        telemetry: DeschedulerMetrics,
        clock: Callable[[], float],
        sync_timeout_s: float,
        workload_usage: WorkloadUsageStore | None = None,
    ) -> None:
        self._workload_usage = workload_usage
        self._workload_usage_state = ""  # the last state logged
        self._leadership = leadership
        self._nodes = nodes
        self._pods = pods
        self._budgets = budgets
        self._prometheus = prometheus
        self._store = store
        self._telemetry = telemetry
        self._clock = clock
        self._sync_timeout_s = sync_timeout_s

    async def gather(
        self, config: DeschedulerConfig, own_records: Mapping[str, EvictionRecord]
    ) -> View | Skipped:
        """The view for one run, or why not; ``own_records``: what this process evicted."""
        if not self._leadership.is_leader:
            return Skipped(RunResult.NOT_LEADER, "not the leader: nothing to do")
        unsynced = await self._caches_ready()
        if unsynced is not None:
            return unsynced
        now_s = self._clock()
        usage = await self._pod_usage(config)
        if isinstance(usage, Skipped):
            return usage
        pods = dict(self._pods.objects)
        if not usage.usage and any(p.phase == "Running" for p in pods.values()):
            return Skipped(
                RunResult.NO_POD_USAGE,
                "Prometheus answered, but with no per-pod usage for any pod: evicting nothing, "
                "since every pod's usage would be a guess from its requests; check that "
                "cAdvisor (the kubelet's /metrics/cadvisor) is scraped and that "
                "podUsageQueries return series labelled namespace and pod",
            )
        since_s = now_s - state_window_s(config)
        state = await self._read_state(now_s, since_s)
        if isinstance(state, Skipped):
            return state
        state.evictions.update(
            (r.uid, r) for r in own_records.values() if r.evicted_at_s >= since_s
        )
        published = await self._read_workload_usage(now_s)
        cluster = ClusterView(
            nodes=dict(self._nodes.nodes),
            pods=pods,
            pod_usage=usage.usage,
            budgets=tuple(self._budgets.budgets.values()),
            recent_evictions=state.recent(since_s),
            workload_usage=published.workloads if published is not None else {},
            workloads_measured=published.pods if published is not None else {},
            moves=tuple(state.moves.values()),
        )
        return View(cluster, state, now_s)

    async def _read_workload_usage(self, now_s: float) -> PublishedUsage | None:
        """The workload usage as the extender follows it, fresh; else None (logged once
        per change of state)."""
        store = self._workload_usage
        if store is None:
            return None
        try:
            read = await store.read(now_s)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # unreadable, the API server's answer, the network
            self._without_workload_usage(f"reading {store.where} failed: {error}")
            return None
        if read is None:
            self._without_workload_usage(f"{store.where} does not exist")
            return None
        published = read[0]
        age_s = now_s - published.published_at_s
        if age_s >= WORKLOAD_USAGE_MAX_AGE_S:
            self._without_workload_usage(f"{store.where} is stale ({age_s:.0f}s old)")
            return None
        if self._workload_usage_state != "ok":
            log.info("workload usage: following %s", store.where)
            self._workload_usage_state = "ok"
        return published

    def _without_workload_usage(self, why: str) -> None:
        if self._workload_usage_state != why:
            log.warning(
                "workload usage: %s; destinations count pods from their requests and limits",
                why,
            )
            self._workload_usage_state = why

    def refresh(self, cluster: ClusterView) -> ClusterView:
        """``cluster`` with the caches' nodes, pods and budgets as they are now, for the
        re-check just before an eviction; usage and recent evictions stay the run's."""
        return ClusterView(
            nodes=dict(self._nodes.nodes),
            pods=dict(self._pods.objects),
            pod_usage=cluster.pod_usage,
            budgets=tuple(self._budgets.budgets.values()),
            recent_evictions=cluster.recent_evictions,
            workload_usage=cluster.workload_usage,
            workloads_measured=cluster.workloads_measured,
            moves=cluster.moves,
        )

    async def _caches_ready(self) -> Skipped | None:
        try:
            async with asyncio.timeout(self._sync_timeout_s):
                await self._leadership.caches_synced()
        except TimeoutError:
            return Skipped(
                RunResult.CACHES_NOT_SYNCED,
                f"caches not synced after {self._sync_timeout_s:g}s "
                f"(nodes {self._nodes.synced}, pods {self._pods.synced}, "
                f"PodDisruptionBudgets {self._budgets.synced}): evicting nothing; can the "
                "descheduler list and watch them?",
            )
        stale = self._leadership.stale_caches()
        if stale:
            return Skipped(RunResult.CACHES_NOT_SYNCED, f"evicting nothing: {stale}")
        return None

    async def _pod_usage(self, config: DeschedulerConfig) -> PodUsage | Skipped:
        queries = PodUsageQueries(config.pod_usage_queries.cpu, config.pod_usage_queries.memory)
        placed = pod_nodes(self._pods.objects.values(), self._nodes.nodes)
        try:
            usage = await read_pod_usage(self._prometheus, queries, placed)
        except PodUsageUnavailable as error:
            if error.reason == BAD_QUERY:
                return Skipped(
                    RunResult.BAD_QUERY,
                    f"evicting nothing: podUsageQueries.{error.resource}: {error}",
                )
            return Skipped(
                RunResult.PROMETHEUS_DOWN, f"Prometheus is down: evicting nothing ({error})"
            )
        for kind, count in usage.dropped.items():
            self._telemetry.invalid_samples.labels(kind).inc(count)
        return usage

    async def _read_state(self, now_s: float, since_s: float) -> DeschedulerState | Skipped:
        try:
            return await self._store.load(now_s, since_s)
        except Exception as error:  # the API client raises HTTP and transport errors
            detail = (
                f"{self._store.where} is unreadable ({error}); fix or delete it (a new one "
                "starts empty)"
                if isinstance(error, StateUnreadable)
                else f"cannot read {self._store.where} ({describe_api_error(error)}); the "
                "descheduler needs "
                "'get' on configmaps in its namespace"
            )
            return Skipped(
                RunResult.HISTORY_UNAVAILABLE,
                f"{detail}: evicting nothing, since without its memory pods just moved "
                "could be moved again",
            )
