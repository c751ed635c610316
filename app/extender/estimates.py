"""What the extender adds to each node's measured usage: pods placed since its sample.

Two sources feed a node's addition (README "Burst-aware estimation"):

* **bound pods**, from the pod cache: a pod counts on its node from its binding until
  a newer sample covers it or ``maxAge`` passes (``app.load.estimate.counts``);
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
"""

from __future__ import annotations

import functools
import math
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.load.estimate import counts, estimate_pod_usage, unsampled_fractions
from app.objects.resources import CPU, MEMORY, ZERO, Resources, parse_quantity
from app.policy import Policy

try:
    from app.extender._pod_demand import pod_demand as _native_pod_demand
except ImportError:  # built without a C compiler: the pure-Python twin below answers
    _native_pod_demand = None  # type: ignore[assignment]

DEFAULT_RESERVATION_TTL_S = 15.0
_FINISHED_PHASES = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True, slots=True)
class ScheduledPod:
    """The pod cache's view of a pod: enough to estimate it and to place it in time."""

    uid: str
    node: str | None  # None until bound
    requests: Resources
    limits: Resources
    bound_at_s: float  # PodScheduled's transition time, else creation time
    finished: bool  # Succeeded or Failed: no longer uses anything


Demand = tuple[float, float, float, float]
"""A pod's (cpu request, memory request, cpu limit, memory limit) in cores and bytes:
plain floats, which hash and compare in C, so a reservation looks its estimate up by it."""

NO_DEMAND: Demand = (0.0, 0.0, 0.0, 0.0)

native_pod_demand: Callable[[dict[str, Any], Callable[[Any], float]], Demand] | None = (
    _native_pod_demand
)
"""The native reader (app/extender/_pod_demand.c); None where it was not built."""


def pod_demand(
    containers: Iterable[Mapping[str, Any] | None],
    init_containers: Iterable[tuple[Mapping[str, Any] | None, bool]],
    overhead: Mapping[str, Any] | None,
) -> Demand:
    """A pod's effective requests and limits, as kube-scheduler sums them: the larger of
    the running phase (the app containers plus every sidecar, an init container with
    ``restartPolicy: Always``) and the init phase (each regular init container plus the
    sidecars listed before it; each sidecar with those before it), plus the overhead.

    Each container is given as its ``resources`` mapping (``requests``, ``limits``); each
    init container as that mapping and whether it is a sidecar. Raises ValueError for
    an unreadable quantity.
    """
    # Four plain locals, not a list and a loop over it: a reservation parses its pod
    # on the extender's only thread, before the next call can be read.
    cpu_request = memory_request = cpu_limit = memory_limit = 0.0
    for resources in containers:
        if resources:
            (cpu_r, memory_r), (cpu_l, memory_l) = _amounts(resources)
            cpu_request += cpu_r
            memory_request += memory_r
            cpu_limit += cpu_l
            memory_limit += memory_l
    side = peak = NO_DEMAND  # the sidecars started so far; the init phase's highest
    for resources, sidecar in init_containers:
        (cpu_r, memory_r), (cpu_l, memory_l) = (
            _amounts(resources) if resources else ((0.0, 0.0), (0.0, 0.0))
        )
        if sidecar:  # runs from here on, beside the app containers too
            side = (side[0] + cpu_r, side[1] + memory_r, side[2] + cpu_l, side[3] + memory_l)
            cpu_request += cpu_r
            memory_request += memory_r
            cpu_limit += cpu_l
            memory_limit += memory_l
            phase = side
        else:
            phase = (cpu_r + side[0], memory_r + side[1], cpu_l + side[2], memory_l + side[3])
        peak = (
            max(peak[0], phase[0]),
            max(peak[1], phase[1]),
            max(peak[2], phase[2]),
            max(peak[3], phase[3]),
        )
    cpu_request = max(cpu_request, peak[0])
    memory_request = max(memory_request, peak[1])
    cpu_limit = max(cpu_limit, peak[2])
    memory_limit = max(memory_limit, peak[3])
    cpu_extra, memory_extra = _pair(overhead)
    return (
        cpu_request + cpu_extra,
        memory_request + memory_extra,
        cpu_limit + cpu_extra,
        memory_limit + memory_extra,
    )


def demand_of(pod: ScheduledPod) -> Demand:
    """The demand of a pod the pod cache holds (the API server's view of it)."""
    requests, limits = pod.requests, pod.limits
    return (requests.cpu_cores, requests.memory_bytes, limits.cpu_cores, limits.memory_bytes)


def requests_and_limits(demand: Demand) -> tuple[Resources, Resources]:
    cpu_request, memory_request, cpu_limit, memory_limit = demand
    return Resources(cpu_request, memory_request), Resources(cpu_limit, memory_limit)


# Each reservation parses its pod's quantities after the answer is sent, but on the
# extender's only thread: the same few strings ("100m", "128Mi") are parsed once.
_cached_quantity = functools.lru_cache(maxsize=4096)(parse_quantity)


def _quantity(value: Any) -> float:
    try:
        return _cached_quantity(value)
    except TypeError:  # unhashable: a list or a map where a quantity belongs
        raise ValueError(f"not a quantity: {value!r}") from None


_NONE = (0.0, 0.0)


def _pair(amounts: Any) -> tuple[float, float]:
    if not amounts:
        return _NONE
    # dict, not the Mapping ABC: both sources (JSON, lightkube) give dicts, and an ABC
    # check costs several times more.
    if not isinstance(amounts, dict):
        raise ValueError(f"not a map of quantities: {amounts!r}")
    cpu, memory = amounts.get(CPU), amounts.get(MEMORY)
    return (
        0.0 if cpu is None else _quantity(cpu),
        0.0 if memory is None else _quantity(memory),
    )


def _amounts(resources: Mapping[str, Any]) -> tuple[tuple[float, float], tuple[float, float]]:
    """(cpu, memory) requested and (cpu, memory) limited by one container's resources."""
    if not isinstance(resources, dict):
        raise ValueError(f"container resources are not a map: {resources!r}")
    return _pair(resources.get("requests")), _pair(resources.get("limits"))


def demand_of_request_pod(pod: Mapping[str, Any]) -> Demand:
    """The demand of the Pod JSON in a kube-scheduler request (ValueError if unreadable).

    The reference for ``request_pod_demand``, which the extender calls: the same answers
    and errors, from native code when it was built."""
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return NO_DEMAND
    overhead = spec.get("overhead")
    return pod_demand(
        _request_resources(spec, "containers"),
        _request_init_containers(spec),
        overhead if isinstance(overhead, dict) else None,
    )


def _native_request_pod_demand(pod: dict[str, Any]) -> Demand:
    assert native_pod_demand is not None
    return native_pod_demand(pod, _cached_quantity)


request_pod_demand: Callable[[dict[str, Any]], Demand] = (
    demand_of_request_pod if native_pod_demand is None else _native_request_pod_demand
)
"""demand_of_request_pod for a request's Pod (a dict), natively where it was built: a
reservation reads its pod after every answer in a burst, on the extender's only thread."""


def _request_resources(spec: dict[str, Any], key: str) -> list[Mapping[str, Any] | None]:
    items = spec.get(key)
    if not items:
        return []
    if not isinstance(items, list):
        raise ValueError(f"spec.{key} is not a list")
    return [c.get("resources") if isinstance(c, dict) else None for c in items]


def _request_init_containers(spec: dict[str, Any]) -> list[tuple[Mapping[str, Any] | None, bool]]:
    items = spec.get("initContainers")
    if not items:
        return []
    if not isinstance(items, list):
        raise ValueError("spec.initContainers is not a list")
    return [
        (c.get("resources"), c.get("restartPolicy") == "Always")
        if isinstance(c, dict)
        else (None, False)
        for c in items
    ]


def _resources(container: Any) -> Mapping[str, Any] | None:
    resources = container.resources
    if resources is None:
        return None
    return {"requests": resources.requests, "limits": resources.limits}


def _time_s(value: Any) -> float | None:
    if isinstance(value, datetime):
        return value.timestamp()
    return None


def scheduled_pod(pod: Any) -> ScheduledPod:
    """The pod cache transform (a lightkube Pod in, a ScheduledPod out)."""
    metadata, spec, status = pod.metadata, pod.spec, pod.status
    requests, limits = requests_and_limits(
        pod_demand(
            map(_resources, spec.containers or []),
            [(_resources(c), c.restartPolicy == "Always") for c in spec.initContainers or []],
            spec.overhead,
        )
    )
    bound_at_s = _time_s(metadata.creationTimestamp)
    for condition in (status.conditions if status else None) or []:
        if condition.type == "PodScheduled" and condition.status == "True":
            bound_at_s = _time_s(condition.lastTransitionTime) or bound_at_s
    node = spec.nodeName
    return ScheduledPod(
        uid=metadata.uid or "",
        node=sys.intern(node) if node else None,
        requests=requests,
        limits=limits,
        bound_at_s=bound_at_s if bound_at_s is not None else 0.0,
        finished=bool(status and status.phase in _FINISHED_PHASES),
    )


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
