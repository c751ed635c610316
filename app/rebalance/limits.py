"""The run's guards that depend on what the plan already chose.

Limits per node, per namespace and in total; per workload (``maxMigratingPerWorkload``
pods in one run, and ``maxUnavailablePerWorkload``: its pods not Ready now, a
replacement still starting included, plus those this run evicts); PodDisruptionBudgets
(never more planned evictions covered by a PDB than its ``disruptionsAllowed``); the
last Ready replica of a controller; and, from the descheduler's recent evictions, the
per-workload cooldown and the replacements it sent to a node within ``returnCooldown``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from app.objects.budgets import PodDisruptionBudgetView
from app.objects.durations import format_duration
from app.objects.evictions import EvictionRecord
from app.objects.pods import PodInfo, workload_of
from app.rebalance.config import DeschedulerConfig, unavailable_allowed
from app.rebalance.outcome import SkipCode


def ready_replica_counts(pods: Iterable[PodInfo]) -> Counter[str]:
    return Counter(
        p.owner.uid for p in pods if p.owner is not None and p.ready and not p.terminating
    )


def cooling_workloads(
    records: Iterable[EvictionRecord], now_s: float, cooldown_s: float
) -> dict[str, float]:
    """Workload -> seconds since its latest eviction, for those still cooling down."""
    latest: dict[str, float] = {}
    for record in records:
        if record.workload is not None:
            latest[record.workload] = max(latest.get(record.workload, 0.0), record.evicted_at_s)
    return {w: now_s - at_s for w, at_s in latest.items() if now_s - at_s < cooldown_s}


# The eviction time is the descheduler's clock, a replacement's creationTimestamp the API
# server's: a pod created up to this long before the eviction still counts as its
# replacement, so that a skew between the two clocks cannot unprotect one.
CLOCK_SKEW_S = 60.0


def replacements_sent(
    records: Iterable[EvictionRecord], now_s: float, window_s: float
) -> dict[tuple[str, str], float]:
    """(workload, node the plan sent its pod to) -> the earliest such eviction within
    ``window_s``: the workload's pods created on that node since are its replacements."""
    sent: dict[tuple[str, str], float] = {}
    for record in records:
        if record.workload is None or record.destination is None:
            continue
        if now_s - record.evicted_at_s >= window_s:
            continue
        key = (record.workload, record.destination)
        sent[key] = min(sent.get(key, record.evicted_at_s), record.evicted_at_s)
    return sent


def workload_pods(pods: Iterable[PodInfo]) -> tuple[Counter[str], Counter[str]]:
    """Per workload: its pods (not finished, not terminating) and how many are not Ready."""
    replicas: Counter[str] = Counter()
    not_ready: Counter[str] = Counter()
    for pod in pods:
        if pod.terminating or pod.phase in ("Succeeded", "Failed"):
            continue
        workload = workload_of(pod)
        if workload is None:
            continue
        replicas[workload] += 1
        if not pod.ready:
            not_ready[workload] += 1
    return replicas, not_ready


class RunBudget:
    def __init__(
        self,
        config: DeschedulerConfig,
        pods: Iterable[PodInfo],
        budgets: Sequence[PodDisruptionBudgetView],
        records: Iterable[EvictionRecord],
        now_s: float,
    ) -> None:
        self._config = config
        self._pods = pods = list(pods)
        self._ready = ready_replica_counts(pods)
        # Counted on the first pod that reaches the per-workload check: most runs stop
        # before any does, and counting costs a pass over every pod in the cluster.
        self._workloads: tuple[Counter[str], Counter[str]] | None = None
        self._per_workload: Counter[str] = Counter()
        self._budgets = budgets
        self._budgets_in: dict[str, list[int]] = {}
        for index, budget in enumerate(budgets):
            self._budgets_in.setdefault(budget.namespace, []).append(index)
        records = list(records)
        self._cooling = cooling_workloads(records, now_s, config.workload_cooldown)
        self._sent = replacements_sent(records, now_s, config.return_cooldown)
        self._now_s = now_s
        self._per_node: Counter[str] = Counter()
        self._per_namespace: Counter[str] = Counter()
        self._per_owner: Counter[str] = Counter()
        self._per_budget: Counter[int] = Counter()
        self.total = 0

    def exhausted(self) -> bool:
        limit = self._config.max_no_of_pods_to_evict_total
        return limit is not None and self.total >= limit

    def node_full(self, node: str) -> bool:
        limit = self._config.max_no_of_pods_to_evict_per_node
        return limit is not None and self._per_node[node] >= limit

    def _covering(self, pod: PodInfo) -> list[int]:
        return [
            index
            for index in self._budgets_in.get(pod.namespace, ())
            if self._budgets[index].selector.matches(pod.labels)
        ]

    def why_not(self, pod: PodInfo, node: str) -> tuple[SkipCode, str] | None:
        """Why this pod may not be evicted now, given what the plan already chose, with
        its fixed code; None when it may."""
        config = self._config
        if self.exhausted():
            total = config.max_no_of_pods_to_evict_total
            return SkipCode.EVICTION_LIMIT, f"maxNoOfPodsToEvictTotal ({total}) reached"
        if self.node_full(node):
            per_node = config.max_no_of_pods_to_evict_per_node
            return SkipCode.EVICTION_LIMIT, f"maxNoOfPodsToEvictPerNode ({per_node}) reached"
        namespace_limit = config.max_no_of_pods_to_evict_per_namespace
        if namespace_limit is not None and self._per_namespace[pod.namespace] >= namespace_limit:
            text = f"maxNoOfPodsToEvictPerNamespace ({namespace_limit}) reached"
            return SkipCode.EVICTION_LIMIT, text
        workload = workload_of(pod)
        if workload is not None and workload in self._cooling:
            ago = format_duration(round(self._cooling[workload]))
            cooldown = format_duration(config.workload_cooldown)
            text = f"cooldown: {workload} had a pod evicted {ago} ago (workloadCooldown {cooldown})"
            return SkipCode.COOLDOWN, text
        if workload is not None and self._is_replacement_sent_here(pod, workload, node):
            ago = format_duration(round(self._now_s - self._sent[workload, node]))
            window = format_duration(config.return_cooldown)
            text = (
                f"replacement: {workload} was sent to {node} {ago} ago and this pod came "
                f"since (returnCooldown {window})"
            )
            return SkipCode.COOLDOWN, text
        if workload is not None:
            refused = self._workload_refusal(pod, workload)
            if refused is not None:
                return refused
        if pod.owner is not None and pod.ready and not config.evict_last_replica:
            remaining = self._ready[pod.owner.uid] - self._per_owner[pod.owner.uid]
            if remaining <= 1:
                text = f"last Ready replica of {pod.owner.kind} {pod.owner.name}"
                return SkipCode.LAST_REPLICA, text
        for index in self._covering(pod):
            budget = self._budgets[index]
            if self._per_budget[index] >= budget.disruptions_allowed:
                text = f"PodDisruptionBudget {budget.name} allows no more disruptions"
                return SkipCode.PDB, text
        return None

    def _is_replacement_sent_here(self, pod: PodInfo, workload: str, node: str) -> bool:
        sent_at = self._sent.get((workload, node))
        return (
            sent_at is not None
            and pod.created_s is not None
            and pod.created_s >= sent_at - CLOCK_SKEW_S
        )

    def _workload_refusal(self, pod: PodInfo, workload: str) -> tuple[SkipCode, str] | None:
        config = self._config
        taken = self._per_workload[workload]
        if taken >= config.max_migrating_per_workload:
            return SkipCode.WORKLOAD_LIMIT, (
                f"{workload} already has {taken} pod(s) evicted in this run "
                f"(maxMigratingPerWorkload {config.max_migrating_per_workload})"
            )
        if self._workloads is None:
            self._workloads = workload_pods(self._pods)
        replicas = self._workloads[0][workload]
        allowed = unavailable_allowed(config.max_unavailable_per_workload, replicas)
        not_ready = self._workloads[1][workload]
        unavailable = not_ready + taken + (1 if pod.ready else 0)
        if unavailable > allowed:
            return SkipCode.WORKLOAD_UNAVAILABLE, (
                f"{workload}: {not_ready} of {replicas} pods not Ready and {taken} evicted in "
                f"this run; one more would make {unavailable} unavailable "
                f"(maxUnavailablePerWorkload {config.max_unavailable_per_workload} = {allowed})"
            )
        return None

    def take(self, pod: PodInfo, node: str) -> None:
        self.total += 1
        self._per_node[node] += 1
        self._per_namespace[pod.namespace] += 1
        workload = workload_of(pod)
        if workload is not None:
            self._per_workload[workload] += 1
        if pod.owner is not None and pod.ready:
            self._per_owner[pod.owner.uid] += 1
        for index in self._covering(pod):
            self._per_budget[index] += 1
