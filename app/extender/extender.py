"""The extender's state and wiring: node table, verbs, node source, policy, metrics."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry

from app.extender.index import IMPLEMENTATION_ENV, VerdictIndex, implementation_of
from app.extender.ledger import DEFAULT_RESERVATION_TTL_S, Contribution, Ledger, PodEstimate
from app.extender.request_pod import request_pod_demand
from app.extender.table import NodeEntry, NodeTable
from app.extender.telemetry import EstimateCollector, ExtenderMetrics
from app.extender.verbs import Outcome, RequestNodes, Verbs
from app.kube.nodes import NodeCache, NodeInfo
from app.kube.pods import PodCache
from app.objects.demand import Demand, container_demand
from app.objects.pods import ScheduledPod
from app.policy import Policy
from app.policy.watch import PolicyWatcher

log = logging.getLogger(__name__)

# Full-nodes mode never hears that a node was deleted; forget nodes unseen this long.
FULL_MODE_FORGET_AFTER_S = 3600.0
_WARN_EVERY_S = 60.0
# How often estimated pods and reservations are aged out: they may end a little late.
ESTIMATE_SWEEP_S = 0.5
# A pod the pod watch has not shown yet may hold a reservation this long, and only this
# many such pods at once (security.md, attack 2). The watch shows a new pod within
# milliseconds of its creation, long before kube-scheduler has scored it.
UNVERIFIED_GRACE_S = 2.0
MAX_UNVERIFIED = 32


class Extender:
    """One extender instance. ``node_cache`` is None in full-nodes mode; ``pod_cache``
    (which needs the node cache for allocatable) enables the burst estimate."""

    def __init__(
        self,
        policy: Policy,
        *,
        node_cache: NodeCache | None = None,
        policy_watcher: PolicyWatcher | None = None,
        registry: CollectorRegistry | None = None,
        clock: Callable[[], float] = time.time,
        mode: str | None = None,
        index: VerdictIndex | None = None,
        pod_cache: PodCache[ScheduledPod] | None = None,
        reservation_ttl_s: float = DEFAULT_RESERVATION_TTL_S,
    ) -> None:
        self.clock = clock
        self._mode = mode
        self.metrics = ExtenderMetrics(registry or CollectorRegistry())
        self.metrics.registry.register(
            EstimateCollector(self._estimated_additions, self._pod_estimates)
        )
        self.ledger: Ledger | None = None
        if pod_cache is not None:
            self.ledger = Ledger(
                lambda: self.table.policy, self._reservation_ended, reservation_ttl_s
            )
        self.table = NodeTable(policy, clock, index, self.ledger)
        self.verbs = Verbs(self.table, clock, request_nodes=self.request_nodes_mode(node_cache))
        self.node_cache = node_cache
        self.pod_cache = pod_cache
        self.policy_watcher = policy_watcher
        self.metrics.policy.loaded(clock())
        self.metrics.nodes_known.set_function(lambda: len(self.table))
        self.metrics.nodes_overloaded.set_function(self._count_overloaded)
        self.metrics.node_cache_age.set_function(self._node_cache_age)
        self.metrics.verdict_index.labels(implementation=self.index_implementation).set(1)
        self.metrics.reservations.set_function(
            lambda: -1.0 if self.ledger is None else float(self.ledger.reservations)
        )
        self.metrics.pods_cached.set_function(
            lambda: -1.0 if pod_cache is None else float(len(pod_cache.objects))
        )
        self._reservation_counts = self.metrics.reservation_counts
        self._requests = self.metrics.requests
        self._last_unknown_warning_s = -math.inf
        # Reservations made on the request's word: uid -> (namespace/name, deadline).
        self._unverified: dict[str, tuple[str, float]] = {}
        self._tasks: list[asyncio.Task[None]] = []
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
        allocatable_changed = self.ledger is not None and self.ledger.set_allocatable(
            name, None if info is None else info.allocatable
        )
        if info is None:
            self.table.remove(name)
            return
        entry = self.table.get(name)
        if self.table.upsert(name, info.annotations) is entry and allocatable_changed:
            self.table.recompute(name)

    def _on_pod(self, key: str, old: ScheduledPod | None, new: ScheduledPod | None) -> None:
        assert self.ledger is not None
        for node in self.ledger.on_pod(key, old, new, self.clock()):
            self.table.recompute(node)

    def _reservation_ended(self, result: str) -> None:
        self._reservation_counts.ended[result] += 1

    def _reserve(self, verb: str, outcome: Outcome) -> None:
        """Reserve the pod's estimate where it will most likely go (ledger.py)."""
        names, pod = outcome.names, outcome.pod
        if self.ledger is None or not names or pod is None:
            return
        if not self.table.policy.spec.estimation.enabled:
            return
        if verb == "prioritize":
            if outcome.best_node is None:
                self._reservation_counts.skipped += 1
                return
            node = outcome.best_node
        elif outcome.nodes - sum(outcome.rejected.values()) == 1:
            # kube-scheduler binds to the only feasible node without calling prioritize.
            get = self.table.index.get
            passing = (n for n in names if (verdict := get(n)) is None or verdict[1] is None)
            found = next(passing, None)
            if found is None:
                return
            node = found
        else:
            return
        metadata = pod.get("metadata")
        if not isinstance(metadata, dict):
            return
        uid = metadata.get("uid")
        if not isinstance(uid, str) or not uid:
            return
        demand = self._demand_to_reserve(uid, metadata, pod)
        if demand is None:
            return
        pod_name = f"{metadata.get('namespace')}/{metadata.get('name')}"
        now_s = self.clock()
        added, affected = self.ledger.reserve(uid, pod_name, node, demand, now_s)
        if added is not None:
            # Only added usage: skip re-assessing the node while it cannot change an answer.
            self.table.add_reserved(node, *added, now_s + self.ledger.ttl_s)
        else:
            for changed in affected:
                self.table.recompute(changed)
        self._reservation_counts.made[verb] += 1

    def _demand_to_reserve(
        self, uid: str, metadata: dict[str, Any], pod: dict[str, Any]
    ) -> Demand | None:
        """What to reserve for the request's pod, or None to refuse (security.md, attack 2).

        Only a pod the API server holds, unbound, gets a reservation, and its demand is
        read from the pod cache, not from the request. A pod the watch has not shown yet
        (it was created an instant ago) gets one on the request's word for
        ``UNVERIFIED_GRACE_S``, at most ``MAX_UNVERIFIED`` such pods at once; the sweep
        drops it unless the watch shows the pod by then."""
        assert self.pod_cache is not None  # the ledger exists only with the pod cache
        key = f"{metadata.get('namespace')}/{metadata.get('name')}"
        known = self.pod_cache.objects.get(key)
        if known is not None:
            if known.uid != uid or known.node is not None or known.finished:
                self._reservation_counts.refused["not-pending"] += 1
                return None
            return container_demand(known.requests, known.limits)
        if uid not in self._unverified and len(self._unverified) >= MAX_UNVERIFIED:
            self._reservation_counts.refused["unverified-limit"] += 1
            return None
        try:
            demand = request_pod_demand(pod)
        except ValueError as error:
            log.debug("not reserving for a pod with unreadable resources: %s", error)
            return None
        self._unverified[uid] = (key, self.clock() + UNVERIFIED_GRACE_S)
        return demand

    def _verify_reservations(self, now_s: float) -> None:
        """End the reservations of pods the watch has not shown within the grace."""
        if not self._unverified or self.pod_cache is None or self.ledger is None:
            return
        objects = self.pod_cache.objects
        for uid, (key, deadline_s) in list(self._unverified.items()):
            known = objects.get(key)
            if known is not None and known.uid == uid:
                del self._unverified[uid]  # a real pod: its binding ends the reservation
            elif now_s >= deadline_s:
                del self._unverified[uid]
                self._reservation_counts.refused["unverified"] += 1
                for node in self.ledger.cancel(uid):
                    self.table.recompute(node)

    def _count_overloaded(self) -> float:
        self.table.refresh(self.clock())
        self.table.expire_estimates(self.clock())
        return float(len(self.table.rejected_metric))

    def _node_cache_age(self) -> float:
        age = self.node_cache.age_s() if self.node_cache is not None else None
        return -1.0 if age is None else age

    def set_policy(self, policy: Policy) -> None:
        """Adopt a reloaded policy whole, or raise and keep the previous one whole.

        The table builds every node's verdict under ``policy`` before it swaps (and
        restores itself if that fails); the ledger re-estimates every reservation before
        it changes any. The policy watcher counts a raise as a failed reload."""
        previous = self.table.policy
        self.table.set_policy(policy)  # the ledger reads the new policy through the table
        if self.ledger is not None:
            try:
                repriced = self.ledger.reprice()
            except BaseException:
                self.table.set_policy(previous)
                raise
            for name in repriced:
                self.table.recompute(name)
        self.metrics.policy.loaded(self.clock())

    def on_policy_reload(self, result: str) -> None:
        self.metrics.policy.reload_result(result)

    def _estimated_additions(self) -> dict[str, Mapping[str, float]]:
        self.table.refresh(self.clock())
        return {entry.name: entry.addition.fractions for entry in self.table}

    def _pod_estimates(self) -> list[PodEstimate]:
        """Every pod counting on a node's estimate now, largest share first."""
        if self.ledger is None or not self.table.policy.spec.estimation.enabled:
            return []
        now_s = self.clock()
        self.table.refresh(now_s)
        self.table.expire_estimates(now_s)

        def sample_at(node: str) -> float | None:
            entry = self.table.lookup(node, now_s)
            return None if entry is None else entry.addition.sample_at_s

        return self.ledger.estimates(sample_at, now_s)

    def debug_estimates(self, limit: int) -> dict[str, Any]:
        """``/debug/estimates``: the ``limit`` largest pod estimates across the cluster,
        each with its pod, node, kind and share of the node (issue 28, attack 1)."""
        now_s = self.clock()
        estimates = self._pod_estimates()
        return {
            "total": len(estimates),
            "pods": [
                {
                    **pod_view(estimate.contribution, now_s),
                    "node": estimate.contribution.node,
                    "share": {r: round(f, 5) for r, f in estimate.fractions.items()},
                }
                for estimate in estimates[:limit]
            ],
        }

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
        self._reserve(verb, outcome)
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
        if self.index_implementation == "native":
            log.info("filter and prioritize are answered by the native verdict index")
        else:
            log.warning(
                "filter and prioritize are answered by the pure-Python verdict index (%s=%s, "
                "or the C extension was not built): each call costs more per node name. "
                "Reinstall with a C compiler at hand for the native one",
                IMPLEMENTATION_ENV,
                os.environ.get(IMPLEMENTATION_ENV, "auto"),
            )
        if self.node_cache is not None:
            self._tasks.append(asyncio.create_task(self.node_cache.run(), name="node-cache"))
        if self.pod_cache is not None:
            self._tasks.append(asyncio.create_task(self.pod_cache.run(), name="pod-cache"))
            self._tasks.append(asyncio.create_task(self._expire_estimates(), name="estimates"))
        else:
            self._tasks.append(asyncio.create_task(self._forget_unseen(), name="forget-unseen"))
        if self.policy_watcher is not None:
            self._tasks.append(asyncio.create_task(self.policy_watcher.run(), name="policy"))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()

    async def _expire_estimates(self) -> None:
        """Age estimated pods and reservations out, between requests rather than in one."""
        while True:
            await asyncio.sleep(ESTIMATE_SWEEP_S)
            self._verify_reservations(self.clock())
            self.table.expire_estimates(self.clock())

    async def _forget_unseen(self) -> None:
        while True:
            await asyncio.sleep(FULL_MODE_FORGET_AFTER_S / 6)
            forgotten = self.table.prune_unseen(FULL_MODE_FORGET_AFTER_S)
            if forgotten:
                log.info("forgot %d node(s) not seen in a request for an hour", forgotten)

    def debug_nodes(self, names: list[str] | None = None) -> list[dict[str, Any]]:
        """The debug view of ``names`` (default: every node), sorted by name."""
        now_s = self.clock()
        self.table.refresh(now_s)
        self.table.expire_estimates(now_s)
        if names is None:
            names = [entry.name for entry in self.table]
        entries = [self.table.lookup(name, now_s) for name in names]
        views = [
            debug_view(entry, self._contributions(entry, now_s), now_s)
            for entry in entries
            if entry is not None
        ]
        return sorted(views, key=lambda view: str(view["name"]))

    def debug_node(self, name: str) -> dict[str, Any] | None:
        now_s = self.clock()
        entry = self.table.lookup(name, now_s)
        return (
            None if entry is None else debug_view(entry, self._contributions(entry, now_s), now_s)
        )

    def _contributions(self, entry: NodeEntry, now_s: float) -> list[Contribution]:
        if self.ledger is None or not self.table.policy.spec.estimation.enabled:
            return []
        return self.ledger.contributions(entry.name, entry.addition.sample_at_s, now_s)


def debug_view(entry: NodeEntry, contributions: list[Contribution], now_s: float) -> dict[str, Any]:
    """Everything about one node's verdict, for ``curl /debug/nodes``."""
    load = entry.load
    policy_windows = {r.metric: r for r in load.readings}
    return {
        "name": entry.name,
        "verdict": "overloaded" if load.overloads else "ok",
        "reasons": [
            {
                "metric": o.metric,
                "usage": round(o.usage_fraction, 5),
                "limit": o.limit_fraction,
                "message": o.reason,
            }
            for o in load.overloads
        ],
        "metrics": {
            metric: {
                "usage": reading.usage_fraction,
                "measured": (
                    None
                    if reading.measured_fraction is None
                    else round(reading.measured_fraction, 5)
                ),
                "estimated_addition": round(reading.unsampled_fraction, 5),
                "freshness": str(reading.freshness),
                "age_seconds": (
                    None if reading.timestamp_s is None else round(now_s - reading.timestamp_s, 1)
                ),
                "raw": entry.annotations.get(metric),
            }
            for metric, reading in policy_windows.items()
        },
        "estimate": estimate_view(entry, contributions, now_s),
        "hot_value": load.hot_value,
        "hot_value_fresh": load.hot_value_fresh,
        "load_score": load.load_score,
        "score": load.score,
        "extender_score": load.extender_score,
        "recheck_in_seconds": (
            None if math.isinf(load.recheck_at_s) else round(load.recheck_at_s - now_s, 1)
        ),
    }


def estimate_view(
    entry: NodeEntry, contributions: list[Contribution], now_s: float
) -> dict[str, Any]:
    """The pods behind a node's estimated addition (README "Burst-aware estimation")."""
    addition = entry.addition
    return {
        "sample_age_seconds": (
            None if addition.sample_at_s is None else round(now_s - addition.sample_at_s, 1)
        ),
        "added": {resource: round(f, 5) for resource, f in addition.fractions.items()},
        "pods": [pod_view(c, now_s) for c in contributions],
    }


def pod_view(contribution: Contribution, now_s: float) -> dict[str, Any]:
    """One pod behind an estimate: who, why it counts (``kind``: reserved, or scored,
    bound or placed, ``app.extender.ledger``) and what it adds, within its node."""
    return {
        "pod": contribution.pod,
        "kind": contribution.kind,
        "age_seconds": round(now_s - contribution.since_s, 1),
        "cpu_cores": round(contribution.usage.cpu_cores, 3),
        "memory_bytes": round(contribution.usage.memory_bytes),
    }
