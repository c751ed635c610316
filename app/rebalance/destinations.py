"""Where an evicted pod can go, and the room the plan reserves there.

A destination must, for the pod's replacement (cheapest checks first):

* admit it by the scheduler's node rules (``fit``);
* not be a node the pod's workload was evicted from within ``returnCooldown``;
* have the pod's requests free;
* take the pod's **real usage** (measured, or the extender's estimate where no series
  exists yet) and stay at or below its ceiling for every resource with a reading:
  ``thresholds`` for a balanced resource (the destination stays underutilized, so it
  never becomes the next source), its allocatable for the other (memory included when
  only CPU is balanced). The destination's usage counts the pods bound there that its
  samples do not show yet, as the extender estimates them;
* admit it by the scheduler's inter-pod rules (``placement``);
* pass **the extender's own load filter** (``evaluate_node``) with the estimate the
  extender will add for a pod just bound there, and every reservation so far: the
  descheduler and the scheduler then never disagree and loop. The pods bound there
  within ``maxAge``, and the replacement, are estimated as the extender estimates them:
  at their workload's published usage where it raises them, within the same bounds
  (``recent_placed``, ``app.load.bounded_raises``; ``ClusterView.workload_usage``).
  Without it a destination the extender then rejects could be chosen (issue 42).

Candidates sit in a heap by headroom (the least free fraction under a ceiling), so each
pod goes to the roomiest node that takes it, spreading evicted pods instead of piling
them on the first node that fits, without scanning every node.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from app.load import (
    MIN_MEASURED_PODS,
    PlacedPod,
    bounded_raises,
    estimate_pod_usage,
    estimate_scheduled,
    node_unsampled,
    raises,
)
from app.objects import (
    RESOURCES,
    EvictionRecord,
    NodeInfo,
    PodInfo,
    Resources,
    format_duration,
    workload_of,
)
from app.policy import Policy
from app.rebalance.config import DeschedulerConfig
from app.rebalance.fit import fit_refusal
from app.rebalance.measure import NodeUsage, evaluate, readings_of, usage_of
from app.rebalance.placement import Placements

# Fractions are sums of floats: 0.2 + 0.1 must count as "at" 0.3, not above it.
ROUNDING = 1e-9


@dataclass
class Room:
    """One destination's state during a plan."""

    node: NodeInfo
    free_requests: Resources  # allocatable - requests of its pods - reserved requests
    unsampled: dict[str, float]  # signed amounts for the load filter: convergence,
    #                              pods its samples miss, reservations (estimated)
    usage_fraction: dict[str, float]  # per resource with a reading, all of the above
    ceiling: Mapping[str, float]  # per resource in usage_fraction

    def headroom(self) -> float:
        return min(self.ceiling[r] - u for r, u in self.usage_fraction.items())

    def add(self, usage: Resources, estimate: Resources) -> None:
        """A pod's real usage onto the fractions, the extender's view onto ``unsampled``."""
        for resource in RESOURCES:
            self.unsampled[resource] = self.unsampled.get(resource, 0.0) + estimate.get(resource)
        for resource in self.usage_fraction:
            self.usage_fraction[resource] += usage.get(resource) / self.node.allocatable.get(
                resource
            )


FINISHED_PHASES = ("Succeeded", "Failed")


def requested_on(pods: Iterable[PodInfo]) -> Resources:
    """The requests the scheduler counts on a node: those of its pods not finished."""
    cpu_cores = memory_bytes = 0.0
    for pod in pods:
        if pod.phase not in FINISHED_PHASES:
            cpu_cores += pod.requests.cpu_cores
            memory_bytes += pod.requests.memory_bytes
    return Resources(cpu_cores, memory_bytes)


def recent_placed(
    pods: Iterable[PodInfo],
    workload_usage: Mapping[str, Resources],
    measured: Mapping[str, int],
    policy: Policy,
    now_s: float,
) -> dict[str, PlacedPod]:
    """Every pod bound within ``maxAge`` and not finished, by key, as the extender's
    estimate takes it: at its workload's published usage where it holds one of the
    workload's raises (``bounded_raises``: a running pod counts as started in time),
    else from its requests and limits."""
    max_age_s = policy.spec.estimation.max_age_s
    keys: list[str] = []
    placed: list[tuple[str | None, PlacedPod]] = []
    for pod in pods:
        bound_at_s = pod.bound_at_s
        if bound_at_s is None or now_s - bound_at_s >= max_age_s:
            continue
        if pod.node_name is None or pod.phase in FINISHED_PHASES:
            continue
        workload = workload_of(pod)
        observed = workload_usage.get(workload) if workload is not None else None
        started_at_s = -math.inf if pod.phase == "Running" else None
        keys.append(pod.key)
        placed.append(
            (
                workload,
                PlacedPod(
                    pod.requests,
                    pod.limits,
                    bound_at_s,
                    observed=observed,
                    started_at_s=started_at_s,
                ),
            )
        )
    if workload_usage:
        bounded = bounded_raises(placed, measured, now_s, policy.spec.estimation)
    else:
        bounded = [pod for _, pod in placed]
    return dict(zip(keys, bounded, strict=True))


def room_of(
    usage: NodeUsage,
    low_fraction: Mapping[str, float],
    pods: Iterable[PodInfo],
    config: DeschedulerConfig,
    policy: Policy,
    now_s: float,
    placed: Mapping[str, PlacedPod] | None = None,
) -> Room:
    """A destination's room: its usage per resource with a fresh reading, the pods bound
    there that its samples miss (``estimate``; each as ``placed`` has it, where it has
    it: ``recent_placed``) added, under its ceilings."""
    node = usage.node
    pods = list(pods)
    usage_fraction = dict(usage.usage_fraction)
    ceiling = dict(low_fraction)
    for resource in RESOURCES:
        if resource in usage_fraction:
            continue  # balanced: measured already (and its readings not made for this)
        metric = config.metrics.get(resource)  # type: ignore[call-overload]
        reading = usage.readings.get(metric) if metric else None
        if reading is None or node.allocatable.get(resource) <= 0:
            continue
        if reading.is_fresh and reading.usage_fraction is not None:
            usage_fraction[resource] = reading.usage_fraction
            ceiling[resource] = 1.0
    unsampled = dict(usage.unsampled)
    max_age_s = policy.spec.estimation.max_age_s
    recent = [
        (placed or {}).get(p.key) or PlacedPod(p.requests, p.limits, p.bound_at_s)
        for p in pods
        if p.bound_at_s is not None
        and now_s - p.bound_at_s < max_age_s
        and p.phase not in FINISHED_PHASES
    ]
    if recent:
        missed = node_unsampled(recent, node.annotations, node.allocatable, policy, now_s)
        for resource, fraction in missed.items():
            unsampled[resource] = unsampled.get(resource, 0.0) + fraction * node.allocatable.get(
                resource
            )
            if resource in usage_fraction:
                usage_fraction[resource] += fraction
    return Room(node, node.allocatable - requested_on(pods), unsampled, usage_fraction, ceiling)


def extender_estimate(
    pod: PodInfo, usage: Resources, policy: Policy, observed: Resources | None = None
) -> Resources:
    """What the extender adds for the pod's replacement just bound on a node (its
    estimate, raised to its workload's ``observed`` usage where that raises it), never
    less than the usage the plan moves."""
    settings = policy.spec.estimation
    if not settings.enabled:
        return usage
    estimate = (
        estimate_scheduled(pod.requests, pod.limits, settings, observed)
        if observed is not None
        else estimate_pod_usage(pod.requests, pod.limits, settings)
    )
    return Resources(
        max(usage.cpu_cores, estimate.cpu_cores), max(usage.memory_bytes, estimate.memory_bytes)
    )


def nodes_left(
    records: Iterable[EvictionRecord], now_s: float, window_s: float
) -> dict[str, dict[str, float]]:
    """Workload -> node -> when its latest pod was evicted from that node, within
    ``window_s``."""
    left: dict[str, dict[str, float]] = {}
    for record in records:
        if record.workload is None or now_s - record.evicted_at_s >= window_s:
            continue
        nodes = left.setdefault(record.workload, {})
        nodes[record.node] = max(nodes.get(record.node, 0.0), record.evicted_at_s)
    return left


@dataclass(frozen=True)
class Rules:
    """What a destination is judged by in one plan (module doc)."""

    config: DeschedulerConfig
    policy: Policy
    now_s: float
    placements: Placements
    left: Mapping[str, Mapping[str, float]]  # see ``nodes_left``
    # ``ClusterView.workload_usage`` and ``workloads_measured``
    workload_usage: Mapping[str, Resources] = field(default_factory=dict)
    measured: Mapping[str, int] = field(default_factory=dict)

    def estimate(self, pod: PodInfo, usage: Resources) -> Resources:
        """``extender_estimate`` of the pod's replacement, at its workload's usage where
        the workload's was measured on enough pods to raise it (app.load, "Bounds").
        Whether a raise is left for it when it lands is not known here: the raised
        estimate is the stricter, so a destination is never one the extender rejects."""
        workload = workload_of(pod)
        observed = self.workload_usage.get(workload) if workload is not None else None
        if (
            observed is None
            or workload is None
            or self.measured.get(workload, 0) < MIN_MEASURED_PODS
            or not raises(pod.requests, pod.limits, observed, self.policy.spec.estimation)
        ):
            observed = None
        return extender_estimate(pod, usage, self.policy, observed)

    def refusal(
        self, pod: PodInfo, usage: Resources, room: Room, *, heat: bool = True
    ) -> str | None:
        """None when the pod's replacement can go to this room; else why not.
        ``heat=False``: the rules that do not ask how hot the pod makes the node
        (its ceiling, the load filter); ``overshoot`` says that."""
        node = room.node
        unfit = fit_refusal(pod, node)
        if unfit is not None:
            return unfit
        workload = workload_of(pod)
        left_at = self.left.get(workload, {}).get(node.name) if workload else None
        if left_at is not None:
            ago = format_duration(round(self.now_s - left_at))
            window = format_duration(self.config.return_cooldown)
            return f"{workload} was evicted from it {ago} ago (returnCooldown {window})"
        for resource in RESOURCES:
            if pod.requests.get(resource) > room.free_requests.get(resource):
                return f"not enough unrequested {resource}"
        for resource, fraction in room.usage_fraction.items():
            after = fraction + usage.get(resource) / node.allocatable.get(resource)
            if heat and after > room.ceiling[resource] + ROUNDING:
                return (
                    f"{resource} would be at {after:.0%} with the pod's real usage, above "
                    f"{room.ceiling[resource]:.0%}"
                )
        inter_pod = self.placements.refusal(pod, node)
        if inter_pod is not None:
            return inter_pod
        if not heat:
            return None
        estimate = self.estimate(pod, usage)
        with_pod = {r: room.unsampled.get(r, 0.0) + estimate.get(r) for r in RESOURCES}
        load = evaluate(node, self.policy, self.now_s, with_pod)
        if load.overloaded:
            return f"fails the load filter: {load.reason}"
        _, missing = usage_of(node, readings_of(load), self.config)
        if missing is not None:
            return f"no usable data: {missing}"
        return None


    def overshoot(self, pod: PodInfo, usage: Resources, room: Room) -> Resources:
        """How far past its ceiling the pod's real usage takes the room, per resource
        (cores, bytes; 0 where it stays at or under). Where only the load filter
        refuses it (its estimate against the policy's limits), the whole usage of each
        resource with a reading: nothing says how much of it is over."""
        node = room.node
        over = {}
        for resource, fraction in room.usage_fraction.items():
            allocatable = node.allocatable.get(resource)
            after = fraction + usage.get(resource) / allocatable
            past = after - room.ceiling[resource]
            if past > ROUNDING:
                over[resource] = past * allocatable
        if not over and self.refusal(pod, usage, room) is not None:
            over = {resource: usage.get(resource) for resource in room.usage_fraction}
        return Resources(over.get("cpu", 0.0), over.get("memory", 0.0))


_NO_HEADROOM = "no destination has headroom left"


class Destinations:
    """The rooms of one plan, roomiest first; ``choose`` then ``reserve``."""

    def __init__(self, rooms: Iterable[Room], rules: Rules) -> None:
        self._rules = rules
        self._rooms = {room.node.name: room for room in rooms}
        self._version = dict.fromkeys(self._rooms, 0)
        self._heap = [(-room.headroom(), name, 0) for name, room in self._rooms.items()]
        heapq.heapify(self._heap)

    def room(self, name: str) -> Room:
        return self._rooms[name]

    def has_headroom(self) -> bool:
        self._drop_stale()
        return bool(self._heap) and -self._heap[0][0] > 0

    def choose(self, pod: PodInfo, usage: Resources) -> tuple[str | None, str]:
        """The roomiest destination that takes the pod, or None and the first refusal."""
        passed: list[tuple[float, str, int]] = []
        chosen: str | None = None
        why = _NO_HEADROOM
        while self._heap:
            entry = heapq.heappop(self._heap)
            negative_headroom, name, version = entry
            if version != self._version[name]:
                continue
            passed.append(entry)
            if -negative_headroom <= 0:
                break
            refused = self._rules.refusal(pod, usage, self._rooms[name])
            if refused is None:
                chosen = name
                break
            if why == _NO_HEADROOM:
                why = f"{name}: {refused}"
        for entry in passed:
            heapq.heappush(self._heap, entry)
        return chosen, why

    def refusal_at(self, name: str, pod: PodInfo, usage: Resources) -> str | None:
        """None when ``name`` is a destination that takes the pod's replacement (the
        node a scheduler chose, not the plan); else why not, as "... it is ..."."""
        room = self._rooms.get(name)
        if room is None:
            return "is not a destination"
        if room.headroom() <= 0:
            return "has no headroom left"
        refused = self._rules.refusal(pod, usage, room)
        return None if refused is None else f"refuses it: {refused}"

    def landing(self, name: str, pod: PodInfo, usage: Resources) -> tuple[str | None, Resources]:
        """For a node a scheduler may choose: why the pod's replacement cannot go there
        at all (not a room, its rules), or None and how far past its ceiling the pod's
        usage would take it (``Rules.overshoot``)."""
        room = self._rooms.get(name)
        if room is None:
            return "is not a destination", Resources()
        refused = self._rules.refusal(pod, usage, room, heat=False)
        if refused is not None:
            return f"refuses it: {refused}", Resources()
        return None, self._rules.overshoot(pod, usage, room)

    def reserve(self, name: str, pod: PodInfo, usage: Resources) -> None:
        room = self._rooms[name]
        room.free_requests = room.free_requests - pod.requests
        room.add(usage, self._rules.estimate(pod, usage))
        self._rules.placements.move(pod, name)
        self._version[name] += 1
        heapq.heappush(self._heap, (-room.headroom(), name, self._version[name]))

    def release(self, name: str, pod: PodInfo, usage: Resources) -> None:
        """Undo ``reserve``: the plan no longer sends the pod there."""
        room = self._rooms[name]
        room.free_requests = room.free_requests + pod.requests
        estimate = self._rules.estimate(pod, usage)
        room.add(usage.scaled(-1.0, -1.0), estimate.scaled(-1.0, -1.0))
        self._rules.placements.unmove(pod)
        self._version[name] += 1
        heapq.heappush(self._heap, (-room.headroom(), name, self._version[name]))

    def _drop_stale(self) -> None:
        while self._heap and self._heap[0][2] != self._version[self._heap[0][1]]:
            heapq.heappop(self._heap)
