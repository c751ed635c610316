"""Gather: the cluster as one run sees it, or why there is no such view.

A run needs four things before it may plan: the lead, caches that have listed (and are
not stale), every pod's real usage from Prometheus, and the descheduler's memory. Any
one of them missing means the run evicts nothing, and ``Skipped`` says why in words an
operator can act on:

- Prometheus down, or rejecting a query, is no reason to move pods;
- an answer with no usage for any pod while pods run (cAdvisor not scraped, a query
  that matches nothing) would make every pod's usage a guess from its requests. A pod
  missing from an answer that has others falls back to its requests, and the plan says
  so;
- without its memory (``app/kube/state.py``) pods just moved could be moved again. A
  first run, with no memory yet, gets an empty one and acts like any other.

What this process evicted itself is added to the memory read, in case writing it
failed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from app.descheduler.report import RunReport, RunResult
from app.descheduler.telemetry import DeschedulerMetrics
from app.kube import BudgetCache, Memory, NodeCache, PodCache, StateStore, StateUnreadable
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
from app.rebalance import ClusterView, DeschedulerConfig, memory_window_s


class Leadership(Protocol):
    """What gathering asks of the leader-elected service that runs the caches."""

    @property
    def is_leader(self) -> bool: ...

    async def caches_synced(self) -> None: ...

    def stale_caches(self) -> str: ...


@dataclass(frozen=True, slots=True)
class View:
    """What a run plans on: the cluster, and the memory it reads and then extends."""

    cluster: ClusterView
    memory: Memory
    now_s: float


@dataclass(frozen=True, slots=True)
class Skipped:
    """Why a run has no view, and so evicts nothing."""

    result: RunResult
    message: str

    def report(self) -> RunReport:
        return RunReport(self.result, self.message)


class ClusterReader:
    """Reads a run's view from the caches, Prometheus and the memory's ConfigMap."""

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
    ) -> None:
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
        since_s = now_s - memory_window_s(config)
        memory = await self._read_memory(now_s, since_s)
        if isinstance(memory, Skipped):
            return memory
        memory.evictions.update(
            (r.uid, r) for r in own_records.values() if r.evicted_at_s >= since_s
        )
        cluster = ClusterView(
            nodes=dict(self._nodes.nodes),
            pods=pods,
            pod_usage=usage.usage,
            budgets=tuple(self._budgets.budgets.values()),
            recent_evictions=memory.recent(since_s),
            moves=tuple(memory.moves.values()),
        )
        return View(cluster, memory, now_s)

    def refresh(self, cluster: ClusterView) -> ClusterView:
        """``cluster`` with the caches' nodes, pods and budgets as they are now, for the
        re-check just before an eviction; usage and recent evictions stay the run's."""
        return ClusterView(
            nodes=dict(self._nodes.nodes),
            pods=dict(self._pods.objects),
            pod_usage=cluster.pod_usage,
            budgets=tuple(self._budgets.budgets.values()),
            recent_evictions=cluster.recent_evictions,
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

    async def _read_memory(self, now_s: float, since_s: float) -> Memory | Skipped:
        try:
            return await self._store.load(now_s, since_s)
        except Exception as error:  # lightkube raises HTTP and transport errors
            detail = (
                f"{self._store.where} is unreadable ({error}); fix or delete it (a new one "
                "starts empty)"
                if isinstance(error, StateUnreadable)
                else f"cannot read {self._store.where} ({error}); the descheduler needs "
                "'get' on configmaps in its namespace"
            )
            return Skipped(
                RunResult.HISTORY_UNAVAILABLE,
                f"{detail}: evicting nothing, since without its memory pods just moved "
                "could be moved again",
            )
