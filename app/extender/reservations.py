"""Where a pod's estimate is reserved, and on whose word (README "Burst-aware estimation").

After each answer the extender reserves the pod's estimate on the node the pod will most
likely get (``app.extender.reserve``): in ``prioritize`` the preferred node, which the
answer lifts alone to the top (``app.load.prioritize``), and in ``filter`` the only node that
passed, since kube-scheduler then binds there without calling ``prioritize``.

A request is not trusted with what it reserves (docs/security.md, attack 2): only a pod
the API server holds, unbound, gets a reservation, and its demand is read from the pod
cache, not from the request. A pod the watch has not shown yet (it was created an
instant ago) gets one on the request's word for ``UNVERIFIED_GRACE_S``, at most
``MAX_UNVERIFIED`` such pods at once; ``verify`` drops it unless the watch shows the pod
by then.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from app.extender.request_pod import request_pod_demand, request_pod_workload
from app.extender.reserve import Reserve
from app.extender.table import NodeTable
from app.extender.telemetry import ReservationCounts
from app.extender.verbs import Outcome
from app.kube import PodCache
from app.load import pod_class
from app.objects import Demand, ScheduledPod, container_demand
from app.policy import pod_classes

log = logging.getLogger(__name__)

# A pod the pod watch has not shown yet may hold a reservation this long, and only this
# many such pods at once (security.md, attack 2). The watch shows a new pod within
# milliseconds of its creation, long before kube-scheduler has scored it.
UNVERIFIED_GRACE_S = 2.0
MAX_UNVERIFIED = 32


class Reservations:
    """The trust rules between a request and the reserve: which node, which pod, how much."""

    def __init__(
        self,
        reserve: Reserve,
        table: NodeTable,
        pod_cache: PodCache[ScheduledPod],
        counts: ReservationCounts,
        clock: Callable[[], float],
    ) -> None:
        self._reserve = reserve
        self._table = table
        self._pod_cache = pod_cache
        self._counts = counts
        self._clock = clock
        # Reservations made on the request's word: uid -> (namespace/name, deadline).
        self._unverified: dict[str, tuple[str, float]] = {}

    def reserve(self, verb: str, outcome: Outcome) -> None:
        """Reserve the pod's estimate where it will most likely go, if the policy
        estimates and the pod may hold a reservation."""
        unread = outcome.pod is None and outcome.pod_at is None  # no verb has run
        if not outcome.nodes or unread or not self._table.policy.spec.estimation.enabled:
            return
        node = self._node_for(verb, outcome)
        if node is None:
            return
        pod = outcome.request_pod()
        if pod is None:
            return
        metadata = pod.get("metadata")
        if not isinstance(metadata, dict):
            return
        uid = metadata.get("uid")
        if not isinstance(uid, str) or not uid:
            return
        pod_name = f"{metadata.get('namespace')}/{metadata.get('name')}"
        found = self._demand(uid, pod_name, pod)
        if found is None:
            return
        demand, workload = found
        now_s = self._clock()
        # Its class of pods, whose usage its estimate counts in too (app.load.class_fractions).
        classes = pod_classes(self._table.policy)
        in_class = pod_class(pod, classes) if classes else None
        added, affected = self._reserve.reserve(
            uid, pod_name, node, demand, now_s, workload, in_class
        )
        if added is not None:
            # Only added usage: skip re-assessing the node while it cannot change an answer.
            self._table.add_reserved(node, *added, now_s + self._reserve.ttl_s)
        else:
            for changed in affected:
                self._table.recompute(changed)
        self._counts.made[verb] += 1

    def _node_for(self, verb: str, outcome: Outcome) -> str | None:
        if verb == "prioritize":
            if outcome.best_node is None:
                self._counts.skipped += 1
            return outcome.best_node
        if outcome.nodes - sum(outcome.rejected.values()) != 1:
            return None
        # kube-scheduler binds to the only feasible node without calling prioritize.
        pod = outcome.request_pod()
        judged = self._table if pod is None else self._table.table_for(pod)  # its class's
        names = outcome.node_names()
        found = _passing(judged, names)
        if found is None and pod is not None:  # passed without its class's own-usage limits
            yielding = self._table.yielding_for(pod)
            found = None if yielding is None else _passing(yielding, names)
        return found

    def _demand(
        self, uid: str, key: str, pod: dict[str, Any]
    ) -> tuple[Demand, str | None] | None:
        """What to reserve for the pod ``key`` (namespace/name) and its workload, or None
        to refuse."""
        known = self._pod_cache.objects.get(key)
        if known is not None:
            if known.uid != uid or known.node is not None or known.finished:
                self._counts.refused["not-pending"] += 1
                return None
            return container_demand(known.requests, known.limits), known.workload
        if uid not in self._unverified and len(self._unverified) >= MAX_UNVERIFIED:
            self._counts.refused["unverified-limit"] += 1
            return None
        try:
            demand = request_pod_demand(pod)
        except ValueError as error:
            log.debug("not reserving for a pod with unreadable resources: %s", error)
            return None
        self._unverified[uid] = (key, self._clock() + UNVERIFIED_GRACE_S)
        return demand, request_pod_workload(pod)

    def verify(self, now_s: float) -> None:
        """End the reservations of pods the watch has not shown within the grace."""
        for uid, (key, deadline_s) in list(self._unverified.items()):
            known = self._pod_cache.objects.get(key)
            if known is not None and known.uid == uid:
                del self._unverified[uid]  # a real pod: its binding ends the reservation
            elif now_s >= deadline_s:
                del self._unverified[uid]
                self._counts.refused["unverified"] += 1
                for node in self._reserve.unreserve(uid):
                    self._table.recompute(node)


def _passing(table: NodeTable, names: Iterable[str]) -> str | None:
    """The first of ``names`` that ``table``'s verdicts pass (unknown: passes)."""
    get = table.index.get
    return next((n for n in names if (verdict := get(n)) is None or verdict[1] is None), None)
