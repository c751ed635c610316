"""The extender: its parts built once, in order, each given what it reads (the
workload-usage follower, the reserve reading it, the node table reading the reserve, the
verbs, debug views and gauges reading the table), the policy in force they adopt
together, and the tasks that keep them current (``upkeep``)."""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable, Mapping

from prometheus_client import CollectorRegistry

from app.extender.classes import ClassTables, KnownNode, rules_without_estimate
from app.extender.debug import DebugViews
from app.extender.gauges import PartGauges
from app.extender.index import (
    IMPLEMENTATION_ENV,
    VerdictIndex,
    implementation_of,
    new_verdict_index,
)
from app.extender.reservations import Reservations
from app.extender.reserve import DEFAULT_RESERVATION_TTL_S, Reserve
from app.extender.table import NodeTable
from app.extender.telemetry import ExtenderMetrics
from app.extender.upkeep import Upkeep
from app.extender.verbs import Outcome, RequestNodes, Verbs
from app.extender.workload_usage import WorkloadUsageFollower, WorkloadUsageSource
from app.kube import NodeCache, NodeInfo, PodCache
from app.objects import ScheduledPod
from app.policy import Policy
from app.runtime import InForce

log = logging.getLogger(__name__)

_WARN_EVERY_S = 60.0


def _workload_in(pod_cache: PodCache[ScheduledPod]) -> Callable[[str], str | None]:
    """The workload of a pod the cache holds, by namespace/name (None: not held): what
    the API server says of the pod, not the request."""

    def workload_of(key: str) -> str | None:
        pod = pod_cache.objects.get(key)
        return pod.workload if pod is not None else None

    return workload_of


def _say_which_index(implementation: str) -> None:
    if implementation == "native":
        log.info("filter and prioritize are answered by the native verdict index")
    else:
        log.warning(
            "filter and prioritize are answered by the pure-Python verdict index (%s=%s, "
            "or the C extension was not built): each call costs more per node name. "
            "Reinstall with a C compiler at hand for the native one",
            IMPLEMENTATION_ENV,
            os.environ.get(IMPLEMENTATION_ENV, "auto"),
        )


def _verbs(
    table: NodeTable,
    clock: Callable[[], float],
    request_nodes: RequestNodes,
    follower: WorkloadUsageFollower | None,
    reserve: Reserve | None,
    pod_cache: PodCache[ScheduledPod] | None,
) -> Verbs:
    """The verbs over ``table``; with the workload usage followed (and so the pod cache
    and its reserve), they estimate a pod at what its workload's pods use, within the
    raises the reserve has left."""
    if follower is None or reserve is None or pod_cache is None:
        return Verbs(table, clock, request_nodes=request_nodes)
    return Verbs(
        table,
        clock,
        request_nodes=request_nodes,
        workloads=follower.published,
        workload_of_pod=_workload_in(pod_cache),
        raise_left=reserve.raises.left_now,
    )


def _nodes_in(node_cache: NodeCache | None) -> Callable[[], Mapping[str, KnownNode]] | None:
    """Every node's annotations and labels as the node cache holds them now (None: no
    node cache)."""
    if node_cache is None:
        return None
    cache = node_cache

    def nodes() -> Mapping[str, KnownNode]:
        return {name: (info.annotations, info.labels) for name, info in cache.nodes.items()}

    return nodes


def _note_rules_without_estimate(policy: Policy, has_estimate: bool) -> None:
    """Warn, at start and at each policy adopted, where the policy's classes or node
    pools are judged without the pod's estimate (``rules_without_estimate``)."""
    note = rules_without_estimate(policy, has_estimate)
    if note is not None:
        log.warning("%s", note)


class Extender:
    """One extender instance. ``node_cache`` is None in full-nodes mode; ``pod_cache``
    (which needs the node cache for allocatable) enables the burst estimate."""

    def __init__(
        self,
        policy: Policy | InForce[Policy],
        *,
        node_cache: NodeCache | None = None,
        registry: CollectorRegistry | None = None,
        clock: Callable[[], float] = time.time,
        mode: str | None = None,
        index: VerdictIndex | None = None,
        pod_cache: PodCache[ScheduledPod] | None = None,
        reservation_ttl_s: float = DEFAULT_RESERVATION_TTL_S,
        workload_usage: WorkloadUsageSource | None = None,
    ) -> None:
        self.clock = clock
        self._mode = mode
        self.node_cache = node_cache
        self.pod_cache = pod_cache
        self.metrics = ExtenderMetrics(registry or CollectorRegistry())
        counts = self.metrics.reservation_counts
        # The one policy in force (a bare Policy: for good); each reload adopted whole.
        self.policy_in_force = policy if isinstance(policy, InForce) else InForce.fixed(policy)
        self.policy_in_force.follow(self.set_policy, self.on_policy_reload)
        policy_now = self.policy_in_force.value
        # Only with the pod cache: the estimate it raises is of pods bound and reserved.
        self.workload_usage = (
            WorkloadUsageFollower(
                workload_usage,
                clock=clock,
                on_change=self._on_workload_usage,
                on_read=self.metrics.workload_usage_read,
            )
            if workload_usage is not None and pod_cache is not None
            else None
        )
        follower = self.workload_usage
        self.reserve = (
            Reserve(policy_now, counts.end, reservation_ttl_s, clock=clock, usage=follower)
            if pod_cache is not None
            else None
        )
        # Each class of pods gets a table of its own beside this one (none without classes).
        index = index if index is not None else new_verdict_index()
        classes = ClassTables(clock, self.reserve, implementation_of(index), _nodes_in(node_cache))
        self.table = NodeTable(policy_now, clock, index, self.reserve, classes)
        _note_rules_without_estimate(policy_now, self.reserve is not None)
        self.reservations = (
            Reservations(self.reserve, self.table, pod_cache, counts, clock)
            if pod_cache is not None and self.reserve is not None
            else None
        )
        self.debug = DebugViews(self.table, self.reserve, clock)
        self.gauges = PartGauges(
            self.metrics, self.table, clock, self.debug, reserve=self.reserve,
            workload_usage=follower, node_cache=node_cache, pod_cache=pod_cache,
        )  # fmt: skip
        request_nodes = self.request_nodes_mode(node_cache)
        self.verbs = _verbs(self.table, clock, request_nodes, follower, self.reserve, pod_cache)
        self.metrics.policy.loaded(clock())
        self._requests = self.metrics.requests
        self._last_unknown_warning_s = -math.inf
        self.upkeep = Upkeep(
            self.table, clock, node_cache=node_cache, pod_cache=pod_cache,
            reservations=self.reservations, policy_in_force=self.policy_in_force,
            workload_usage=follower,
        )  # fmt: skip
        if node_cache is not None:
            node_cache.add_listener(self._on_node)
        if pod_cache is not None:
            pod_cache.add_listener(self._on_pod)

    @staticmethod
    def request_nodes_mode(node_cache: NodeCache | None) -> RequestNodes:
        """With a node cache the table holds only the API server's data (security.md,
        attack 1); without one, requests are the only source of annotations."""
        return RequestNodes.STORE if node_cache is None else RequestNodes.BY_NAME

    @property
    def mode(self) -> str:
        if self._mode is not None:
            return self._mode
        return "node-cache" if self.node_cache is not None else "full-nodes"

    def _on_node(self, name: str, _old: NodeInfo | None, info: NodeInfo | None) -> None:
        allocatable_changed = self.reserve is not None and self.reserve.set_allocatable(
            name, None if info is None else info.allocatable
        )
        if info is None:
            self.table.remove(name)
            return
        entry = self.table.get(name)
        if self.table.upsert(name, info.annotations, info.labels) is entry and allocatable_changed:
            self.table.recompute(name)

    def _on_pod(self, key: str, old: ScheduledPod | None, new: ScheduledPod | None) -> None:
        assert self.reserve is not None
        for node in self.reserve.on_pod(key, old, new, self.clock()):
            self.table.recompute(node)

    def _on_workload_usage(self) -> None:
        """What the workloads are observed to use changed: every estimate resting on it
        (reservations and pods bound within maxAge) is redone, off the request path."""
        assert self.reserve is not None
        self.reserve.reestimate(self.clock())
        for node in self.reserve.tracked_nodes():
            self.table.recompute(node)

    def set_policy(self, policy: Policy) -> None:
        """Adopt a reloaded policy whole, or raise and keep the previous one whole.

        The table builds every node's verdict under ``policy`` before it swaps them in
        (and keeps the old ones if that fails); the reserve re-estimates every reservation before
        it changes any. The policy watcher counts a raise as a failed reload."""
        previous = self.table.policy
        self.table.set_policy(policy)
        if self.reserve is not None:
            self.reserve.set_policy(policy)
            try:
                reestimated = self.reserve.reestimate(self.clock())
            except BaseException:
                self.reserve.set_policy(previous)
                self.table.set_policy(previous)
                raise
            for name in reestimated:
                self.table.recompute(name)
        _note_rules_without_estimate(policy, self.reserve is not None)
        self.metrics.policy.loaded(self.clock())

    def on_policy_reload(self, result: str) -> None:
        self.metrics.policy.reload_result(result)

    def ready(self) -> tuple[bool, str]:
        """Ready once every cache has synced, and while none has lost the API server for
        long: the estimate needs the pods as much as the verdicts need the nodes."""
        for cache in (self.node_cache, self.pod_cache):
            if cache is not None:
                current, reason = cache.current()
                if not current:
                    return False, reason
        return True, "ok"

    def record(self, verb: str, code: int, elapsed_s: float, outcome: Outcome | None) -> None:
        requests = self._requests
        requests.observe(verb, code, elapsed_s)
        if outcome is None:
            return
        # Reserved and counted here, after the answer is sent: off the scheduling cycle.
        if self.reservations is not None:
            self.reservations.reserve(verb, outcome)
        if outcome.rejected:
            metric_of_reason, rejected = self.table.metric_of_reason, requests.rejected
            for reason, nodes in outcome.rejected.items():
                metric = metric_of_reason.get(reason, "unknown")
                rejected[metric] = rejected.get(metric, 0) + nodes
        if outcome.unknown_nodes:
            requests.unknown_nodes += outcome.unknown_nodes
            self._warn_unknown(outcome)

    def _warn_unknown(self, outcome: Outcome) -> None:
        now_s = self.clock()
        if now_s - self._last_unknown_warning_s < _WARN_EVERY_S:
            return
        self._last_unknown_warning_s = now_s
        log.warning(
            "%d of %d node(s) in a request are unknown to the extender; they pass unfiltered "
            "and score as nodes without data. %s",
            outcome.unknown_nodes,
            outcome.nodes,
            self.unknown_nodes_advice(),
        )

    def unknown_nodes_advice(self) -> str:
        """Why node names can be unknown here, and what to do about it."""
        if self.node_cache is None:
            return (
                "This extender runs without a node cache: set nodeCacheCapable: false in the "
                "scheduler's extender config, or run with --node-cache"
            )
        return "The node cache has not seen them yet (still syncing, or the nodes are new)"

    @property
    def index_implementation(self) -> str:
        return implementation_of(self.table.index)

    async def start(self) -> None:
        _say_which_index(self.index_implementation)
        self.upkeep.start()

    async def stop(self) -> None:
        await self.upkeep.stop()
