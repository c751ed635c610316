"""The run's guards that depend on what the plan already chose.

Limits per node, per namespace and in total; per workload (``maxMigratingPerWorkload``
pods in one run, and ``maxUnavailablePerWorkload``: its pods not Ready now, a
replacement still starting included, plus those this run evicts); PodDisruptionBudgets
(never more planned evictions covered by a PDB than its ``disruptionsAllowed``); the
last Ready replica of a controller; and, from the descheduler's recent evictions, the
per-workload cooldown, and replacements (where the plan sent them, or back where their
workload left) not evicted again within ``returnCooldown``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from app.objects import (
    TEMPLATE_HASH_LABEL,
    EvictionRecord,
    PodDisruptionBudgetView,
    PodInfo,
    format_duration,
    workload_of,
)
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


# The eviction time is the descheduler's clock, taken after the call returned; a
# replacement's creationTimestamp is the API server's, truncated to the second. A pod
# created up to this long before the eviction still counts as its replacement, so that
# neither the truncation nor a small skew between the clocks unprotects one.
CLOCK_SKEW_S = 5.0


def replacement_nodes(
    records: Iterable[EvictionRecord], now_s: float, window_s: float
) -> dict[tuple[str, str], tuple[float, str]]:
    """(workload, node) -> when the workload's earliest eviction within ``window_s`` sent a
    pod to that node, or took one from it, and which: its pods created there since are
    replacements (the scheduler put one where the plan sent it, or back where it was)."""
    nodes: dict[tuple[str, str], tuple[float, str]] = {}
    for record in sorted(records, key=lambda r: r.evicted_at_s, reverse=True):
        if record.workload is None or now_s - record.evicted_at_s >= window_s:
            continue
        nodes[record.workload, record.node] = (record.evicted_at_s, "came back to")
        if record.destination is not None:
            nodes[record.workload, record.destination] = (record.evicted_at_s, "was sent to")
    return nodes


def workload_pods(pods: Iterable[PodInfo]) -> tuple[Counter[str], Counter[str]]:
    """Per workload: its pods (not finished, not terminating) and how many are not Ready.

    ``workload_of`` reads a pod's namespace, its owner's kind and name, and its
    pod-template-hash label only, so the pods are counted per such controller first and
    each controller's workload is named once, not once per pod: this pass is over every
    pod in the cluster, once in each plan that asks maxUnavailablePerWorkload."""
    per_controller: dict[tuple[str, str, str, str | None], tuple[PodInfo, list[int]]] = {}
    for pod in pods:
        owner = pod.owner
        if owner is None or pod.terminating or pod.phase in ("Succeeded", "Failed"):
            continue  # no owner: a bare pod, of no workload
        controller = (pod.namespace, owner.kind, owner.name, pod.labels.get(TEMPLATE_HASH_LABEL))
        counted = per_controller.get(controller)
        if counted is None:
            counted = per_controller[controller] = (pod, [0, 0])
        counts = counted[1]
        counts[0] += 1
        if not pod.ready:
            counts[1] += 1
    replicas: Counter[str] = Counter()
    not_ready: Counter[str] = Counter()
    for pod, (count, unready) in per_controller.values():
        workload = workload_of(pod)
        if workload is None:
            continue
        replicas[workload] += count
        if unready:
            not_ready[workload] += unready
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
        # Read once here (the view may make them on first read) and indexed per pod after.
        self._budgets = budgets = tuple(budgets)
        self._budgets_in: dict[str, list[int]] = {}
        for index, budget in enumerate(budgets):
            self._budgets_in.setdefault(budget.namespace, []).append(index)
        self._covered: dict[tuple[str, tuple[tuple[str, str], ...]], list[int]] = {}
        records = list(records)
        self._cooling = cooling_workloads(records, now_s, config.workload_cooldown)
        self._replacements = replacement_nodes(records, now_s, config.return_cooldown)
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
        """The budgets (by index) whose selector matches the pod: a function of its
        namespace and labels, asked of every candidate pod, and a workload's pods carry
        the same labels, so each distinct set is matched once per run (read only)."""
        key = (pod.namespace, tuple(pod.labels.items()))
        covering = self._covered.get(key)
        if covering is None:
            covering = self._covered[key] = [
                index
                for index in self._budgets_in.get(pod.namespace, ())
                if self._budgets[index].selector.matches(pod.labels)
            ]
        return covering

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
        if workload is not None:
            replacement = self._replacement(pod, workload, node)
            if replacement is not None:
                return SkipCode.COOLDOWN, replacement
            refused = self._workload_refusal(pod, workload)
            if refused is not None:
                return refused
        if pod.owner is not None and pod.ready and not config.evict_last_replica:
            remaining = self._ready[pod.owner.uid] - self._per_owner.get(pod.owner.uid, 0)
            if remaining <= 1:
                text = f"last Ready replica of {pod.owner.kind} {pod.owner.name}"
                return SkipCode.LAST_REPLICA, text
        for index in self._covering(pod):
            budget = self._budgets[index]
            if self._per_budget.get(index, 0) >= budget.disruptions_allowed:
                text = f"PodDisruptionBudget {budget.name} allows no more disruptions"
                return SkipCode.PDB, text
        return None

    def _replacement(self, pod: PodInfo, workload: str, node: str) -> str | None:
        """Why this pod is a replacement that must stay on ``node`` a while, or None."""
        at_s, how = self._replacements.get((workload, node), (None, ""))
        if at_s is None or pod.created_s is None or pod.created_s < at_s - CLOCK_SKEW_S:
            return None
        ago = format_duration(round(self._now_s - at_s))
        window = format_duration(self._config.return_cooldown)
        return (
            f"replacement: a pod of {workload} was evicted {ago} ago and this one {how} "
            f"{node} since (returnCooldown {window})"
        )

    def _workload_refusal(self, pod: PodInfo, workload: str) -> tuple[SkipCode, str] | None:
        config = self._config
        taken = self._per_workload.get(workload, 0)
        if taken >= config.max_migrating_per_workload:
            return SkipCode.WORKLOAD_LIMIT, (
                f"{workload} already has {taken} pod(s) evicted in this run "
                f"(maxMigratingPerWorkload {config.max_migrating_per_workload})"
            )
        if self._workloads is None:
            self._workloads = workload_pods(self._pods)
        replicas = self._workloads[0].get(workload, 0)
        allowed = unavailable_allowed(config.max_unavailable_per_workload, replicas)
        not_ready = self._workloads[1].get(workload, 0)
        unavailable = not_ready + taken + (1 if pod.ready else 0)
        if unavailable > allowed:
            return SkipCode.WORKLOAD_UNAVAILABLE, (
                f"{workload}: {not_ready} of {replicas} pods not Ready and {taken} evicted in "
                f"this run; one more would make {unavailable} unavailable "
                f"(maxUnavailablePerWorkload {config.max_unavailable_per_workload} = {allowed})"
            )
        return None

    def workload_room(self, workload: str) -> int:
        """How many more of the workload's pods this run may evict, by
        maxMigratingPerWorkload and maxUnavailablePerWorkload (a Ready pod's count)."""
        config = self._config
        taken = self._per_workload.get(workload, 0)
        if self._workloads is None:
            self._workloads = workload_pods(self._pods)
        replicas = self._workloads[0].get(workload, 0)
        allowed = unavailable_allowed(config.max_unavailable_per_workload, replicas)
        unavailable = self._workloads[1].get(workload, 0) + taken
        return max(0, min(config.max_migrating_per_workload - taken, allowed - unavailable))

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

    def give_back(self, pod: PodInfo, node: str) -> None:
        """Undo ``take``: the plan no longer evicts the pod."""
        self.total -= 1
        self._per_node[node] -= 1
        self._per_namespace[pod.namespace] -= 1
        workload = workload_of(pod)
        if workload is not None:
            self._per_workload[workload] -= 1
        if pod.owner is not None and pod.ready:
            self._per_owner[pod.owner.uid] -= 1
        for index in self._covering(pod):
            self._per_budget[index] -= 1
