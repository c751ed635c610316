"""Where an evicted pod can go, and the room the plan reserves there.

A destination must let the pod run by the scheduler's node rules (``fit``), have the
pod's requests free, stay at or below its high threshold with the pod's usage added,
and pass **the extender's own load filter** (``evaluate_node``) with every
reservation so far: the descheduler and the scheduler then never disagree and loop.

Candidates sit in a heap by headroom (the least free fraction of a balanced
resource), so each pod goes to the roomiest node that takes it, spreading evicted pods
instead of piling them on the first node that fits, without scanning every node.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from app.objects.nodes import NodeInfo
from app.objects.pods import PodInfo
from app.objects.resources import RESOURCES, Resources
from app.policy import Policy
from app.rebalance.config import DeschedulerConfig
from app.rebalance.fit import fit_refusal
from app.rebalance.measure import evaluate, readings_of, usage_of


@dataclass
class Room:
    """One destination's state during a plan."""

    node: NodeInfo
    free_requests: Resources  # allocatable - requests of its pods - reserved requests
    unsampled: dict[str, float]  # signed amounts: convergence + reservations
    usage_fraction: dict[str, float]  # balanced resources, with ``unsampled``
    high_fraction: Mapping[str, float]

    def headroom(self) -> float:
        return min(self.high_fraction[r] - u for r, u in self.usage_fraction.items())


FINISHED_PHASES = ("Succeeded", "Failed")


def requested_on(pods: Iterable[PodInfo]) -> Resources:
    """The requests the scheduler counts on a node: those of its pods not finished."""
    cpu_cores = memory_bytes = 0.0
    for pod in pods:
        if pod.phase not in FINISHED_PHASES:
            cpu_cores += pod.requests.cpu_cores
            memory_bytes += pod.requests.memory_bytes
    return Resources(cpu_cores, memory_bytes)


def refusal(
    pod: PodInfo,
    usage: Resources,
    room: Room,
    config: DeschedulerConfig,
    policy: Policy,
    now_s: float,
) -> str | None:
    """None when the pod can go to this room; else why not (cheapest checks first)."""
    unfit = fit_refusal(pod, room.node)
    if unfit is not None:
        return unfit
    for resource in RESOURCES:
        if pod.requests.get(resource) > room.free_requests.get(resource):
            return f"not enough unrequested {resource}"
    for resource, fraction in room.usage_fraction.items():
        after = fraction + usage.get(resource) / room.node.allocatable.get(resource)
        if after > room.high_fraction[resource]:
            high = room.high_fraction[resource]
            return f"{resource} would be at {after:.0%}, above {high:.0%}"
    with_pod = {r: room.unsampled.get(r, 0.0) + usage.get(r) for r in RESOURCES}
    load = evaluate(room.node, policy, now_s, with_pod)
    if load.overloaded:
        return f"fails the load filter: {load.reason}"
    _, missing = usage_of(room.node, readings_of(load), config)
    if missing is not None:
        return f"no usable data: {missing}"
    return None


class Destinations:
    """The rooms of one plan, roomiest first; ``choose`` then ``reserve``."""

    def __init__(self, rooms: Iterable[Room], config: DeschedulerConfig, policy: Policy,
                 now_s: float) -> None:
        self._config, self._policy, self._now_s = config, policy, now_s
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
        why = "no destination has headroom left"
        while self._heap:
            entry = heapq.heappop(self._heap)
            negative_headroom, name, version = entry
            if version != self._version[name]:
                continue
            passed.append(entry)
            if -negative_headroom <= 0:
                break
            refused = refusal(pod, usage, self._rooms[name], self._config, self._policy,
                              self._now_s)
            if refused is None:
                chosen = name
                break
            if why == "no destination has headroom left":
                why = f"{name}: {refused}"
        for entry in passed:
            heapq.heappush(self._heap, entry)
        return chosen, why

    def reserve(self, name: str, pod: PodInfo, usage: Resources) -> None:
        room = self._rooms[name]
        room.free_requests = room.free_requests - pod.requests
        for resource in RESOURCES:
            room.unsampled[resource] = room.unsampled.get(resource, 0.0) + usage.get(resource)
        for resource in room.usage_fraction:
            room.usage_fraction[resource] += usage.get(resource) / room.node.allocatable.get(
                resource
            )
        self._version[name] += 1
        heapq.heappush(self._heap, (-room.headroom(), name, self._version[name]))

    def _drop_stale(self) -> None:
        while self._heap and self._heap[0][2] != self._version[self._heap[0][1]]:
            heapq.heappop(self._heap)
