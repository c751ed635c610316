"""What the extender adds to each node's measured usage: pods placed since its sample.

Two sources feed a node's unsampled usage (README "Burst-aware estimation"):

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

**Workload usage**: a pod placed through the scheduler (``scored``, ``bound``, and a
reservation) whose workload's pods are observed to use far more than it declares is
estimated at what they use (``app.load.estimate_scheduled``; ``observed``, from
``app.extender.workload_usage``). When that changes, ``reestimate`` and a recompute of
every ``tracked_nodes`` node redo every estimate resting on it. The raise is bounded
(``app.load.estimate``, "Bounds"; issue 42): which pods hold one of their workload's
raises is ``app.extender.raises`` (``raises``), which ``reestimate`` asks to hand them
out again.

**What an estimate rests on** (issue 28, attack 1; ``app.load.estimate.Evidence``): a
pod reserved here and then bound is ``scored``; one the watch saw pending and then
bound is ``bound`` (a binder with ``pods/binding`` placed it); both are estimated from
their limits. One first seen already on its node (created with ``spec.nodeName``,
around kube-scheduler and this extender's filter, or listed at start) is ``placed``
and estimated from its requests alone. Every pod's estimate is at most its node's
allocatable. ``largest`` names the biggest estimates for the debug view and the metric.

The Reserve keeps, per node, only the pods bound within ``maxAge`` and the live
reservations, so a node's unsampled usage is recomputed from a handful of entries when that
node changes, never by scanning pods on a request. The pod cache keeps a small
``ScheduledPod`` per pod (what the estimate reads), so 100,000 pods stay cheap.

A pod's demand comes from ``app.extender.request_pod`` (a request's Pod JSON) or the
pod cache (``app.kube.pods.scheduled_pod``), both by ``app.objects.demand``.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace

from app.extender.defaults import RESERVATION_TTL_S
from app.extender.node_estimates import EstimatedUnder, Fractions, NodeEstimates
from app.extender.raises import BoundPod, PublishedUsage, Raises
from app.load import (
    START_GRACE_S,
    Evidence,
    class_fractions,
    counts,
    estimate_with_evidence,
    unsampled_fractions,
)
from app.objects import ZERO, Demand, Resources, ScheduledPod
from app.policy import EstimationPolicy, Policy

DEFAULT_RESERVATION_TTL_S = RESERVATION_TTL_S


@dataclass(frozen=True, slots=True)
class Contribution:
    """One pod behind a node's unsampled usage, for ``/debug/nodes/{name}``."""

    pod: str  # namespace/name
    kind: str  # "reserved", or the Evidence of a bound pod: "scored", "bound", "placed"
    since_s: float  # bound at, or reserved at
    usage: Resources
    node: str = ""
    raised_by: Resources = ZERO  # of ``usage``, what its workload's usage adds


@dataclass(frozen=True, slots=True)
class PodEstimate:
    """One pod's estimate and its share of its node's allocatable, per resource."""

    contribution: Contribution
    fractions: Mapping[str, float]
    # of ``fractions``, what its workload's usage adds (``Contribution.raised_by``)
    raise_fractions: Mapping[str, float] = field(default_factory=dict)

    @property
    def share(self) -> float:
        return max(self.fractions.values(), default=0.0)


@dataclass(frozen=True, slots=True)
class Unsampled:
    """What a node's samples do not contain yet, and when that changes with the clock."""

    sample_at_s: float | None
    fractions: Mapping[str, float]
    changes_at_s: float


NOTHING_UNSAMPLED = Unsampled(None, {}, math.inf)


@dataclass(slots=True)  # not frozen: one is made per reservation, on the only thread
class Reservation:
    uid: str
    pod: str  # namespace/name
    node: str
    demand: Demand
    made_at_s: float
    usage: Resources  # the estimate, under the policy in force when it was made or re-estimated
    ended: bool = False  # confirmed, moved or dropped: no longer counts on its node
    workload: str | None = None  # whose observed usage its estimate may take
    pod_class: str | None = None  # its class of pods: its estimate counts in its usage too


class _NodeReservations:
    """One node's live reservations, oldest first, and their estimates summed.

    A reservation that ends is only marked ended, and leaves the queue when it reaches
    the front: appending to a deque is the cheapest record there is, and the front is
    where expiry looks."""

    __slots__ = ("classed", "cpu_cores", "live", "memory_bytes", "queue")

    def __init__(self) -> None:
        self.queue: deque[Reservation] = deque()
        self.live = 0
        self.cpu_cores = 0.0
        self.memory_bytes = 0.0
        self.classed = 0  # live reservations of a class of pods

    def add(self, reservation: Reservation) -> None:
        self.queue.append(reservation)
        self.live += 1
        usage = reservation.usage
        self.cpu_cores += usage.cpu_cores
        self.memory_bytes += usage.memory_bytes
        self.classed += reservation.pod_class is not None

    def end(self, reservation: Reservation) -> None:
        reservation.ended = True
        self.live -= 1
        usage = reservation.usage
        self.cpu_cores -= usage.cpu_cores
        self.memory_bytes -= usage.memory_bytes
        self.classed -= reservation.pod_class is not None

    def oldest(self) -> Reservation:
        """The oldest live reservation (there is one while the node is in the reserve)."""
        queue = self.queue
        while queue[0].ended:
            queue.popleft()
        return queue[0]

    def __iter__(self) -> Iterator[Reservation]:
        return (reservation for reservation in self.queue if not reservation.ended)

    def total(self) -> Resources:
        return Resources(self.cpu_cores, self.memory_bytes)


class _Shares:
    """A node's unsampled usage as the reserve sums it: the total, and each class's part of it
    (``app.load.class_fractions``: what the class's pods add to its usage)."""

    __slots__ = ("by_class", "total")

    def __init__(self) -> None:
        self.total = ZERO
        self.by_class: dict[str, Resources] = {}

    def add(self, usage: Resources, pod_class: str | None) -> None:
        self.total = self.total + usage
        if pod_class is not None:
            self.by_class[pod_class] = self.by_class.get(pod_class, ZERO) + usage

    def add_reservations(self, reserved: _NodeReservations) -> None:
        """A node's live reservations: summed already; walked only where one has a class."""
        self.total = self.total + reserved.total()
        if reserved.classed:
            for reservation in reserved:
                name = reservation.pod_class
                if name is not None:
                    self.by_class[name] = self.by_class.get(name, ZERO) + reservation.usage

    def fractions(self, allocatable: Resources) -> dict[str, float]:
        fractions = unsampled_fractions((self.total,), allocatable)
        if self.by_class:
            fractions.update(class_fractions(self.by_class, allocatable))
        return fractions


def _rebuilt(estimated: list[tuple[Reservation, Resources]]) -> _NodeReservations:
    """A node's reservations with their new estimates, summed anew."""
    rebuilt = _NodeReservations()
    for reservation, usage in estimated:
        reservation.usage = usage
        rebuilt.add(reservation)
    return rebuilt


ReservationEnd = Callable[[str], None]  # called with "confirmed", "moved" or "dropped"

_NO_NODES: tuple[str, ...] = ()


class Reserve:
    """Per node: the pods bound within maxAge and the live reservations."""

    def __init__(
        self,
        policy: Policy,
        on_reservation_end: ReservationEnd,
        ttl_s: float = DEFAULT_RESERVATION_TTL_S,
        *,
        clock: Callable[[], float],
        usage: PublishedUsage | None = None,  # what the workloads are observed to use
    ) -> None:
        self._policy = EstimatedUnder(policy)  # the node table's, adopted with it
        self._on_end = on_reservation_end
        self.ttl_s = ttl_s
        self._bound: dict[str, dict[str, BoundPod]] = {}  # node → pod key → pod
        self._reserved: dict[str, _NodeReservations] = {}  # only nodes that hold some
        self._reservations: dict[str, Reservation] = {}  # uid → reservation
        self._node_estimates = NodeEstimates(self._policy)
        self.raises = Raises(self._policy, clock, usage)

    def set_policy(self, policy: Policy) -> None:
        """Estimate under ``policy`` from now on (``reestimate`` redoes the reservations)."""
        self._policy.policy = policy

    def tracked_nodes(self) -> list[str]:
        """Every node with a pod bound within maxAge or a live reservation."""
        return list(self._bound.keys() | self._reserved.keys())

    @property
    def reservations(self) -> int:
        return len(self._reservations)

    def tracks(self, node: str) -> bool:
        return node in self._bound or node in self._reserved

    def allocatable(self, node: str) -> Resources | None:
        """The node's allocatable, if the node cache has shown it."""
        return self._node_estimates.allocatable(node)

    def set_allocatable(self, node: str, allocatable: Resources | None) -> bool:
        """Record a node's allocatable (None: the node is gone); True if it changed."""
        changed = self._node_estimates.set_allocatable(node, allocatable)
        reserved = self._reserved.get(node)
        if changed and reserved is not None:  # each estimate is bounded by the node: anew
            settings = self._policy().spec.estimation
            self._reserved[node] = _rebuilt(self._estimates(reserved, settings))
        return changed

    def on_pod(
        self, key: str, old: ScheduledPod | None, new: ScheduledPod | None, now_s: float
    ) -> set[str]:
        """Follow one pod cache change; return the nodes whose unsampled usage may have changed."""
        old_node = old.node if old is not None and not old.finished else None
        new_node = new.node if new is not None and not new.finished else None
        affected: set[str] = set()
        if old_node is not None and old_node != new_node:
            pods = self._bound.get(old_node)
            gone = pods.pop(key, None) if pods is not None else None
            if pods is not None and gone is not None:
                affected.add(old_node)
                self.raises.release(gone.workload, key)
                if not pods:
                    del self._bound[old_node]
        elif old_node is not None and new is not None and _started_now(old, new):
            self._started(key, old_node, new.started_at_s)
            affected.add(old_node)
        if new is not None and new_node is not None and new_node != old_node:
            reservation = self._end(new.uid)
            if reservation is not None:
                affected.add(reservation.node)
                self._on_end("confirmed" if reservation.node == new_node else "moved")
            if now_s - new.bound_at_s < self._policy().spec.estimation.max_age_s:
                if reservation is not None:
                    evidence = Evidence.SCORED
                elif old is not None and old.node is None:
                    evidence = Evidence.BOUND  # watched pending, then bound
                else:
                    evidence = Evidence.PLACED  # first seen on its node
                pod = _bound_pod(new, evidence, now_s, reservation)
                self._bound.setdefault(new_node, {})[key] = pod
                self.raises.on_bound(key, pod, now_s, reservation is not None)
                affected.add(new_node)
            elif reservation is not None:
                self.raises.release(reservation.workload, reservation.pod)
        elif new is None and old is not None and old.node is None:
            reservation = self._end(old.uid)  # deleted before it was bound
            if reservation is not None:
                affected.add(reservation.node)
                self.raises.release(reservation.workload, reservation.pod)
                self._on_end("dropped")
        return affected

    def _started(self, key: str, node: str, started_at_s: float | None) -> None:
        pod = self._bound.get(node, {}).get(key)
        if pod is not None:
            self._bound[node][key] = pod = replace(pod, started_at_s=started_at_s)
            self.raises.on_started(key, pod)

    def reserve(
        self,
        uid: str,
        pod: str,
        node: str,
        demand: Demand,
        now_s: float,
        workload: str | None = None,
        pod_class: str | None = None,
    ) -> tuple[Fractions | None, tuple[str, ...]]:
        """Reserve a pod's estimate on ``node``.

        Returns the (cpu, memory) fractions of allocatable it adds to ``node`` when that is
        all that changed (nothing taken off anywhere; no class's usage), else None and the
        nodes whose unsampled usage changed: none if the pod was already reserved there."""
        previous = self._reservations.get(uid)
        if previous is not None and previous.node == node:
            return None, _NO_NODES
        observed = self.raises.for_reservation(workload, pod, demand, now_s)
        usage, fractions = self._node_estimates.reservation(demand, node, observed)
        reservation = self._reservations[uid] = Reservation(
            uid, pod, node, demand, now_s, usage, workload=workload, pod_class=pod_class
        )
        on_node = self._reserved.get(node)
        if on_node is None:
            on_node = self._reserved[node] = _NodeReservations()
        on_node.add(reservation)
        if previous is None:
            return (fractions, _NO_NODES) if pod_class is None else (None, (node,))
        self._remove(previous)
        return None, (node, previous.node)

    def unreserve(self, uid: str) -> tuple[str, ...]:
        """End a pod's reservation without a result (it was refused); its node, if any."""
        reservation = self._end(uid)
        if reservation is None:
            return _NO_NODES
        self.raises.release(reservation.workload, reservation.pod)
        return (reservation.node,)

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

    def reestimate(self, now_s: float) -> list[str]:
        """Re-estimate every reservation under the current policy and workload usage;
        return the nodes that hold one. Call it after every policy change and every
        change of the workload usage: the memo of estimates is cleared here, not checked
        on every reservation."""
        settings = self._policy().spec.estimation
        self.raises.hand_out(_every_pod(self._bound), self._reservations.values(), now_s)
        # Every estimate first, then the swap: a failure leaves the reservations as they were.
        estimates = {
            node: self._estimates(on_node, settings) for node, on_node in self._reserved.items()
        }
        self._node_estimates.forget_estimates()
        for node, estimated in estimates.items():
            self._reserved[node] = _rebuilt(estimated)
        return list(self._reserved)

    def _estimates(
        self, on_node: _NodeReservations, settings: EstimationPolicy
    ) -> list[tuple[Reservation, Resources]]:
        """A node's live reservations, each with its estimate under ``settings`` and the
        node's allocatable; nothing is changed (``_rebuilt`` swaps them in)."""
        return [
            (
                reservation,
                self._node_estimates.usage(
                    reservation.demand,
                    reservation.node,
                    settings,
                    self.raises.of_reservation(reservation),
                ),
            )
            for reservation in on_node
        ]

    def unsampled(self, node: str, sample_at_s: float | None, now_s: float) -> Unsampled:
        """The node's unsampled usage at ``now_s``; forgets the entries that have aged out.

        Costs O(pods bound on the node within maxAge): reservations are kept summed."""
        settings = self._policy().spec.estimation
        self._expire(node, now_s, settings.max_age_s)
        shares = _Shares()
        changes_at_s = math.inf
        reserved = self._reserved.get(node)
        if reserved is not None:
            shares.add_reservations(reserved)
            changes_at_s = reserved.oldest().made_at_s + self.ttl_s
        allocatable = self._node_estimates.allocatable_or_zero(node)
        for key, pod in self._bound.get(node, {}).items():
            if counts(pod.bound_at_s, sample_at_s, now_s, settings):
                observed = self.raises.raised(key, pod, now_s)
                shares.add(_bound_usage(pod, settings, allocatable, observed), pod.pod_class)
                changes_at_s = min(changes_at_s, pod.bound_at_s + settings.max_age_s)
                # A raise held by a pod not started ends with its grace; after it, the
                # pod's estimate (lowered only, or none: ``Raises.raised``) stays.
                grace_end_s = pod.bound_at_s + START_GRACE_S
                if observed is not None and pod.started_at_s is None and now_s < grace_end_s:
                    changes_at_s = min(changes_at_s, grace_end_s)
        if not settings.enabled or shares.total == ZERO:
            return Unsampled(sample_at_s, {}, changes_at_s)
        return Unsampled(sample_at_s, shares.fractions(allocatable), changes_at_s)

    def _expire(self, node: str, now_s: float, max_age_s: float) -> None:
        pods = self._bound.get(node)
        if pods is not None:
            for key in [k for k, pod in pods.items() if now_s - pod.bound_at_s >= max_age_s]:
                self.raises.release(pods.pop(key).workload, key)
            if not pods:
                del self._bound[node]
        reserved = self._reserved.get(node)
        while reserved is not None:
            oldest = reserved.oldest()
            if now_s < oldest.made_at_s + self.ttl_s:
                break
            self._end(oldest.uid)
            self.raises.release(oldest.workload, oldest.pod)
            self._on_end("dropped")
            reserved = self._reserved.get(node)

    def contributions(
        self, node: str, sample_at_s: float | None, now_s: float
    ) -> list[Contribution]:
        """The pods behind a node's unsampled usage, for ``/debug/nodes/{name}``."""
        settings = self._policy().spec.estimation
        allocatable = self._node_estimates.allocatable_or_zero(node)
        raised = self.raises.raised
        found = [
            _bound_contribution(key, pod, node, raised(key, pod, now_s), settings, allocatable)
            for key, pod in self._bound.get(node, {}).items()
            if counts(pod.bound_at_s, sample_at_s, now_s, settings)
        ]
        for r in self._reserved.get(node, ()):
            held = self.raises.holds(r.workload, r.pod)
            base = self._node_estimates.usage(r.demand, node, settings, None) if held else r.usage
            raised_by = r.usage - base
            found.append(Contribution(r.pod, "reserved", r.made_at_s, r.usage, node, raised_by))
        return found


def _bound_pod(
    new: ScheduledPod, evidence: Evidence, now_s: float, reservation: Reservation | None
) -> BoundPod:
    """The pod as the reserve keeps it; its class is its reservation's (none without)."""
    bound_at_s = min(new.bound_at_s, now_s)
    pod_class = reservation.pod_class if reservation is not None else None
    return BoundPod(
        new.requests, new.limits, bound_at_s, evidence, new.workload, new.started_at_s, pod_class
    )


def _every_pod(bound: Mapping[str, Mapping[str, BoundPod]]) -> Iterator[tuple[str, BoundPod]]:
    return ((key, pod) for pods in bound.values() for key, pod in pods.items())


def _started_now(old: ScheduledPod | None, new: ScheduledPod | None) -> bool:
    """Whether the pod's containers were first seen started in this change."""
    return (
        old is not None
        and new is not None
        and old.started_at_s is None
        and new.started_at_s is not None
    )


def _bound_contribution(
    key: str,
    pod: BoundPod,
    node: str,
    observed: Resources | None,
    settings: EstimationPolicy,
    allocatable: Resources,
) -> Contribution:
    """A bound pod behind its node's unsampled usage, with what its workload's usage adds."""
    estimate = _bound_usage(pod, settings, allocatable, observed)
    raised_by = ZERO
    if observed is not None:
        raised_by = estimate - _bound_usage(pod, settings, allocatable, None)
    return Contribution(key, pod.evidence.value, pod.bound_at_s, estimate, node, raised_by)


def _bound_usage(
    pod: BoundPod, settings: EstimationPolicy, allocatable: Resources, observed: Resources | None
) -> Resources:
    return estimate_with_evidence(
        pod.requests, pod.limits, pod.evidence, settings, allocatable, observed
    )
