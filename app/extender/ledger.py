"""What the extender adds to each node's measured usage: pods placed since its sample.

Two sources feed a node's addition (README "Burst-aware estimation"):

* **bound pods**, from the pod cache: a pod counts on its node from its binding until
  a sample taken ``coveredAfter`` later covers it or ``maxAge`` passes
  (``app.load.estimate.counts``);
* **reservations**: kube-scheduler starts the next pod's cycle milliseconds after it
  chose a node for the last one, long before the binding reaches any watch. So the
  extender reserves a pod's estimate, keyed by its UID, on the node it will most likely
  get: in ``prioritize`` the preferred node, which the answer puts alone on top (see
  ``VerdictIndex.prioritize``), and in ``filter`` the
  only node that passes (kube-scheduler then skips ``prioritize``). When the watch shows
  the binding, the reservation ends (``confirmed``, or ``moved`` if the pod went
  elsewhere) and the bound pod counts instead. One never confirmed is ``dropped``
  after ``ttl_s``.

The Ledger keeps, per node, only the pods bound within ``maxAge`` and the live
reservations, so a node's addition is recomputed from a handful of entries when that
node changes, never by scanning pods on a request. The pod cache keeps a small
``ScheduledPod`` per pod (what the estimate reads), so 100,000 pods stay cheap.

A pod's demand comes from ``app.extender.request_pod`` (a request's Pod JSON) or the
pod cache (``app.kube.pods.scheduled_pod``), both by ``app.objects.demand``.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from app.load.estimate import counts, estimate_pod_usage, unsampled_fractions
from app.objects.demand import Demand, requests_and_limits
from app.objects.pods import ScheduledPod
from app.objects.resources import CPU, MEMORY, ZERO, Resources
from app.policy import Policy

DEFAULT_RESERVATION_TTL_S = 15.0


@dataclass(frozen=True, slots=True)
class Contribution:
    """One pod behind a node's addition, for ``/debug/nodes/{name}``."""

    pod: str  # namespace/name
    kind: str  # "bound" or "reserved"
    since_s: float  # bound at, or reserved at
    usage: Resources


@dataclass(frozen=True, slots=True)
class Addition:
    """What a node's samples do not contain yet, and when that changes with the clock."""

    sample_at_s: float | None
    fractions: Mapping[str, float]
    changes_at_s: float


NO_ADDITION = Addition(None, {}, math.inf)


@dataclass(frozen=True, slots=True)
class _Bound:
    requests: Resources
    limits: Resources
    bound_at_s: float


@dataclass(slots=True)  # not frozen: one is made per reservation, on the only thread
class Reservation:
    uid: str
    pod: str  # namespace/name
    node: str
    demand: Demand
    made_at_s: float
    usage: Resources  # the estimate, under the policy in force when it was made or repriced
    ended: bool = False  # confirmed, moved or dropped: no longer counts on its node


class _NodeReservations:
    """One node's live reservations, oldest first, and their estimates summed.

    A reservation that ends is only marked ended, and leaves the queue when it reaches
    the front: appending to a deque is the cheapest record there is, and the front is
    where expiry looks."""

    __slots__ = ("cpu_cores", "live", "memory_bytes", "queue")

    def __init__(self) -> None:
        self.queue: deque[Reservation] = deque()
        self.live = 0
        self.cpu_cores = 0.0
        self.memory_bytes = 0.0

    def add(self, reservation: Reservation) -> None:
        self.queue.append(reservation)
        self.live += 1
        usage = reservation.usage
        self.cpu_cores += usage.cpu_cores
        self.memory_bytes += usage.memory_bytes

    def end(self, reservation: Reservation) -> None:
        reservation.ended = True
        self.live -= 1
        usage = reservation.usage
        self.cpu_cores -= usage.cpu_cores
        self.memory_bytes -= usage.memory_bytes

    def oldest(self) -> Reservation:
        """The oldest live reservation (there is one while the node is in the ledger)."""
        queue = self.queue
        while queue[0].ended:
            queue.popleft()
        return queue[0]

    def __iter__(self) -> Iterator[Reservation]:
        return (reservation for reservation in self.queue if not reservation.ended)

    def total(self) -> Resources:
        return Resources(self.cpu_cores, self.memory_bytes)


Fractions = tuple[float, float]  # (cpu, memory), each a fraction of allocatable
ReservationEnd = Callable[[str], None]  # called with "confirmed", "moved" or "dropped"

# A burst is many pods of a few shapes: a reservation looks its estimate and fractions up
# rather than recomputing them on the extender's one thread. Cleared when full.
_MEMO_SIZE = 4096
_NO_NODES: tuple[str, ...] = ()


class Ledger:
    """Per node: the pods bound within maxAge and the live reservations."""

    def __init__(
        self,
        policy: Callable[[], Policy],
        on_reservation_end: ReservationEnd,
        ttl_s: float = DEFAULT_RESERVATION_TTL_S,
    ) -> None:
        self._policy = policy
        self._on_end = on_reservation_end
        self.ttl_s = ttl_s
        self._bound: dict[str, dict[str, _Bound]] = {}  # node → pod key → pod
        self._reserved: dict[str, _NodeReservations] = {}  # only nodes that hold some
        self._reservations: dict[str, Reservation] = {}  # uid → reservation
        self._allocatable: dict[str, Resources] = {}
        # (demand, node) → the estimate and its (cpu, memory) fractions of the node's
        # allocatable, under the policy and the allocatable known when it was made
        self._priced: dict[tuple[Demand, str], tuple[Resources, Fractions]] = {}

    @property
    def reservations(self) -> int:
        return len(self._reservations)

    def tracks(self, node: str) -> bool:
        return node in self._bound or node in self._reserved

    def allocatable(self, node: str) -> Resources | None:
        """The node's allocatable, if the node cache has shown it."""
        return self._allocatable.get(node)

    def set_allocatable(self, node: str, allocatable: Resources | None) -> bool:
        """Record a node's allocatable (None: the node is gone); True if it changed."""
        if allocatable is None:
            self._allocatable.pop(node, None)
            return False
        changed = self._allocatable.get(node) != allocatable
        if changed:
            self._priced.clear()
        self._allocatable[node] = allocatable
        return changed

    def on_pod(
        self, key: str, old: ScheduledPod | None, new: ScheduledPod | None, now_s: float
    ) -> set[str]:
        """Follow one pod cache change; return the nodes whose addition may have changed."""
        old_node = old.node if old is not None and not old.finished else None
        new_node = new.node if new is not None and not new.finished else None
        affected: set[str] = set()
        if old_node is not None and old_node != new_node:
            pods = self._bound.get(old_node)
            if pods is not None and pods.pop(key, None) is not None:
                affected.add(old_node)
                if not pods:
                    del self._bound[old_node]
        if new is not None and new_node is not None and new_node != old_node:
            if now_s - new.bound_at_s < self._policy().spec.estimation.max_age_s:
                pod = _Bound(new.requests, new.limits, min(new.bound_at_s, now_s))
                self._bound.setdefault(new_node, {})[key] = pod
                affected.add(new_node)
            reservation = self._end(new.uid)
            if reservation is not None:
                affected.add(reservation.node)
                self._on_end("confirmed" if reservation.node == new_node else "moved")
        elif new is None and old is not None and old.node is None:
            reservation = self._end(old.uid)  # deleted before it was bound
            if reservation is not None:
                affected.add(reservation.node)
                self._on_end("dropped")
        return affected

    def _price(self, key: tuple[Demand, str]) -> tuple[Resources, Fractions]:
        """estimate_pod_usage under the current policy, and its unsampled_fractions of the
        node's allocatable, remembered per pod shape and node (until ``reprice``)."""
        settings = self._policy().spec.estimation
        if len(self._priced) >= _MEMO_SIZE:
            self._priced.clear()
        demand, node = key
        usage = estimate_pod_usage(*requests_and_limits(demand), settings)
        fractions = unsampled_fractions((usage,), self._allocatable.get(node, ZERO))
        priced = self._priced[key] = (usage, (fractions.get(CPU, 0.0), fractions.get(MEMORY, 0.0)))
        return priced

    def reserve(
        self, uid: str, pod: str, node: str, demand: Demand, now_s: float
    ) -> tuple[Fractions | None, tuple[str, ...]]:
        """Reserve a pod's estimate on ``node``.

        Returns the (cpu, memory) fractions of allocatable it adds to ``node`` when that is
        all that changed (nothing was taken off anywhere), else None and the nodes whose addition
        changed: none if the pod was already reserved there."""
        previous = self._reservations.get(uid)
        if previous is not None and previous.node == node:
            return None, _NO_NODES
        key = (demand, node)
        usage, fractions = self._priced.get(key) or self._price(key)
        reservation = self._reservations[uid] = Reservation(uid, pod, node, demand, now_s, usage)
        on_node = self._reserved.get(node)
        if on_node is None:
            on_node = self._reserved[node] = _NodeReservations()
        on_node.add(reservation)
        if previous is None:
            return fractions, _NO_NODES
        self._remove(previous)
        return None, (node, previous.node)

    def cancel(self, uid: str) -> tuple[str, ...]:
        """End a pod's reservation without a result (it was refused); its node, if any."""
        reservation = self._end(uid)
        return _NO_NODES if reservation is None else (reservation.node,)

    def _end(self, uid: str) -> Reservation | None:
        reservation = self._reservations.pop(uid, None)
        if reservation is not None:
            self._remove(reservation)
        return reservation

    def _remove(self, reservation: Reservation) -> None:
        node = reservation.node
        on_node = self._reserved[node]
        on_node.end(reservation)
        if not on_node.live:
            del self._reserved[node]  # its sums go with it: exactly zero, free of rounding

    def reprice(self) -> list[str]:
        """Re-estimate every reservation under the current policy; return the nodes that
        hold one. Call it after every policy change: the memo of estimates is cleared
        here, not checked against the policy on every reservation."""
        settings = self._policy().spec.estimation
        # Every estimate first, then the swap: a failure leaves the reservations as they were.
        usages = [
            (reservation, estimate_pod_usage(*requests_and_limits(reservation.demand), settings))
            for on_node in self._reserved.values()
            for reservation in on_node
        ]
        self._priced.clear()
        for reservation, usage in usages:
            reservation.usage = usage
        for node, on_node in list(self._reserved.items()):
            repriced = _NodeReservations()
            for reservation in on_node:
                repriced.add(reservation)
            self._reserved[node] = repriced
        return list(self._reserved)

    def addition(self, node: str, sample_at_s: float | None, now_s: float) -> Addition:
        """The node's addition at ``now_s``; forgets the entries that have aged out.

        Costs O(pods bound on the node within maxAge): reservations are kept summed."""
        settings = self._policy().spec.estimation
        self._expire(node, now_s, settings.max_age_s)
        total = ZERO
        changes_at_s = math.inf
        reserved = self._reserved.get(node)
        if reserved is not None:
            total = reserved.total()
            changes_at_s = reserved.oldest().made_at_s + self.ttl_s
        for pod in self._bound.get(node, {}).values():
            if counts(pod.bound_at_s, sample_at_s, now_s, settings):
                total = total + estimate_pod_usage(pod.requests, pod.limits, settings)
                changes_at_s = min(changes_at_s, pod.bound_at_s + settings.max_age_s)
        if not settings.enabled or total == ZERO:
            return Addition(sample_at_s, {}, changes_at_s)
        fractions = unsampled_fractions((total,), self._allocatable.get(node, ZERO))
        return Addition(sample_at_s, fractions, changes_at_s)

    def _expire(self, node: str, now_s: float, max_age_s: float) -> None:
        pods = self._bound.get(node)
        if pods is not None:
            for key in [k for k, pod in pods.items() if now_s - pod.bound_at_s >= max_age_s]:
                del pods[key]
            if not pods:
                del self._bound[node]
        reserved = self._reserved.get(node)
        while reserved is not None:
            oldest = reserved.oldest()
            if now_s < oldest.made_at_s + self.ttl_s:
                break
            self._end(oldest.uid)
            self._on_end("dropped")
            reserved = self._reserved.get(node)

    def contributions(
        self, node: str, sample_at_s: float | None, now_s: float
    ) -> list[Contribution]:
        """The pods behind a node's addition, for ``/debug/nodes/{name}``."""
        settings = self._policy().spec.estimation
        found = [
            Contribution(
                key, "bound", pod.bound_at_s, estimate_pod_usage(pod.requests, pod.limits, settings)
            )
            for key, pod in self._bound.get(node, {}).items()
            if counts(pod.bound_at_s, sample_at_s, now_s, settings)
        ]
        reserved = self._reserved.get(node)
        if reserved is not None:
            found += [Contribution(r.pod, "reserved", r.made_at_s, r.usage) for r in reserved]
        return found
