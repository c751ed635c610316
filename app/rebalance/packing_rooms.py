"""The destinations of one consolidation pass (``consolidation.plan_consolidation``),
kept in the order it offers them and with the totals its floor reads. Pure.

- the rooms that take pods, the largest nodes first (``size_class``), and among
  nodes of one size the fullest first (the least unrequested share of their scarcest
  resource): a pod goes to the first that takes it, so pods pack onto used nodes
  instead of waking the next idle one, and onto the nodes that stay: consolidation
  tries the smallest nodes first (``consolidation.plan_consolidation``), since the
  nodes left hold the same pods in fewer nodes when the small ones go. A
  reservation moves only its own room (``bisect``), not a sort of every room for
  every pod;
- the allocatable and unrequested totals of the nodes that stay, kept as rooms change,
  for the floor of spare capacity (``consolidation.minSpare``), less what the pods
  waiting for a node request;
- a load-filter refusal remembered per room, with the estimate it refused, until the
  room changes: the filter is monotone in the estimate added, so a larger one is
  refused too without asking the load model again;
- an index of the nodes by label, for pods with a nodeSelector: they are offered only
  the nodes it matches.

bench/consolidation.py measures a pass at 5,000 nodes and 100,000 pods.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping, Sequence

from app.objects import RESOURCES, ZERO, NodeInfo, PodInfo, Resources
from app.rebalance.config import DeschedulerConfig, Resource
from app.rebalance.destinations import Destinations, Room, Rules


class PackingRooms:
    """The destinations of a consolidation pass (module doc)."""

    def fullest_taking(self, pod: PodInfo, usage: Resources, source: str) -> tuple[str | None, str]:
        """The first destination in ``_order`` that takes the pod (packing): the
        largest nodes first, the fullest first among those of a size; one without the
        pod's requests free or without headroom is passed over before the rules are
        asked."""
        first_refusal = "no other node takes pods"
        cpu, memory = pod.requests.cpu_cores, pod.requests.memory_bytes
        estimate = self.rules.estimate(pod, usage)
        order: Iterable[tuple[int, float, str]] = self._order
        if pod.node_selector:  # only the nodes its nodeSelector matches, from the index
            matching = self._matching(pod.node_selector) - {source}
            if not matching:
                return None, "no destination: no other node matches its nodeSelector"
            order = sorted(self._key[name] for name in matching if name in self._key)
        for *_, name in order:
            if name == source:
                continue
            room = self.destinations.room(name)
            free = room.free_requests
            failed = self._filter_failed.get(name)
            if free.cpu_cores < cpu or free.memory_bytes < memory or room.headroom() <= 0:
                refused: str | None = "has no room for its requests or no headroom left"
            elif (
                failed is not None
                and failed[0] == self._changes.get(name, 0)
                and estimate.cpu_cores >= failed[1]
                and estimate.memory_bytes >= failed[2]
            ):
                # The load filter refused a smaller estimate on this room as it is: it
                # refuses this one too (it is monotone in the estimate added).
                refused = failed[3]
            else:
                refused = self.destinations.refusal_at(name, pod, usage)
                if refused is not None and refused.startswith(_LOAD_FILTER_REFUSAL):
                    self._filter_failed[name] = (
                        self._changes.get(name, 0),
                        estimate.cpu_cores,
                        estimate.memory_bytes,
                        refused,
                    )
            if refused is None:
                return name, ""
            if first_refusal == "no other node takes pods":
                first_refusal = f"{name} {refused}"
        return None, f"no destination: {first_refusal}"

    def spare_refusal(self, node: NodeInfo, moving: Resources | None = None) -> str | None:
        """Why draining ``node`` would go below the floor of spare capacity, or None;
        ``moving``: the requests still to place, for a node that is no destination (one
        being drained). From the running totals of the nodes that stay, less what the
        pods waiting for a node request: those need the room first."""
        staying = node.name in self.schedulable
        room = self._room_of.get(node.name) if staying else None
        resource: Resource
        for resource in ("cpu", "memory"):
            percent = self.config.consolidation.min_spare.get(resource)
            allocatable = self._allocatable_total[resource]
            free_left = self._free_total[resource] - self.pending.get(resource)
            if staying:
                allocatable -= node.allocatable.get(resource)
            if room is not None:
                free_left -= room.free_requests.get(resource)
                to_place = node.allocatable.get(resource) - room.free_requests.get(resource)
            else:
                to_place = moving.get(resource) if moving is not None else 0.0
            left = free_left - to_place
            spare = left / allocatable if allocatable > 0 else 0.0
            if percent is not None and spare < percent / 100:
                return (
                    f"draining it would leave {spare:.0%} of {resource} unrequested on the "
                    f"nodes left, under consolidation.minSpare {percent:g}%"
                )
            rise = self.rise.get(resource)
            if rise > 0 and left < rise:
                return (
                    f"draining it would leave {_amount(left, resource)} of {resource} "
                    f"unrequested on the nodes left, under the {_amount(rise, resource)} "
                    f"rise in demand seen within consolidation.riseWithin "
                    f"({self.config.consolidation.rise_within:g}s): pods of such a rise "
                    f"would wait for a new node"
                )
        return None

    def __init__(
        self,
        config: DeschedulerConfig,
        destinations: Destinations,
        rooms: Sequence[Room],
        schedulable: dict[str, NodeInfo],
        rules: Rules,
        pending: Resources,
        rise: Resources = ZERO,
    ) -> None:
        self.config = config
        self.rise = rise  # the rise in demand to keep room for (rise.py)
        self.destinations = destinations
        self.rooms = rooms
        self.schedulable = schedulable  # the nodes that stay (drained ones taken out)
        self.rules = rules
        self.pending = pending  # the requests of the pods waiting for a node
        self._room_of = {room.node.name: room for room in self.rooms}
        self._allocatable_total = {
            r: sum(n.allocatable.get(r) for n in self.schedulable.values()) for r in RESOURCES
        }
        self._free_total = {
            r: sum(
                room.free_requests.get(r)
                for room in self.rooms
                if room.node.name in self.schedulable
            )
            for r in RESOURCES
        }
        # A room's changes (reservations made or released), and the smallest estimate
        # the load filter refused on it since its last change.
        self._changes: dict[str, int] = {}
        self._filter_failed: dict[str, tuple[int, float, float, str]] = {}
        self._by_label: dict[tuple[str, str], set[str]] | None = None
        self._key: dict[str, tuple[int, float, str]] = {}
        self._order: list[tuple[int, float, str]] = []
        for room in self.rooms:
            if room.node.name in self.schedulable:
                self._key[room.node.name] = key = _destination_key(room)
                self._order.append(key)
        self._order.sort()

    def _matching(self, selector: Mapping[str, str]) -> set[str]:
        """The nodes that stay whose labels match ``selector`` (an index by label, made
        on first use)."""
        if self._by_label is None:
            self._by_label = {}
            for node in self.schedulable.values():
                for item in node.labels.items():
                    self._by_label.setdefault(item, set()).add(node.name)
        sets = [self._by_label.get(item, set()) for item in selector.items()]
        return set.intersection(*sets) & self.schedulable.keys()

    def _reindex(self, name: str, before: Resources) -> None:
        room = self._room_of[name]
        self._changes[name] = self._changes.get(name, 0) + 1
        if name not in self._key:
            return
        for resource in RESOURCES:
            self._free_total[resource] += room.free_requests.get(resource) - before.get(resource)
        old = self._key[name]
        del self._order[bisect.bisect_left(self._order, old)]
        self._key[name] = new = _destination_key(room)
        bisect.insort(self._order, new)

    def reserve(self, name: str, pod: PodInfo, usage: Resources) -> None:
        before = self._room_of[name].free_requests
        self.destinations.reserve(name, pod, usage)
        self._reindex(name, before)

    def release(self, name: str, pod: PodInfo, usage: Resources) -> None:
        before = self._room_of[name].free_requests
        self.destinations.release(name, pod, usage)
        self._reindex(name, before)

    def leave(self, name: str) -> None:
        """``name`` is drained: no destination, and out of the totals of the nodes left."""
        node = self.schedulable.pop(name)
        for resource in RESOURCES:
            self._allocatable_total[resource] -= node.allocatable.get(resource)
        key = self._key.pop(name, None)
        if key is not None:
            del self._order[bisect.bisect_left(self._order, key)]
            for resource in RESOURCES:
                self._free_total[resource] -= self._room_of[name].free_requests.get(resource)


_LOAD_FILTER_REFUSAL = "refuses it: fails the load filter"


def _amount(value: float, resource: str) -> str:
    return f"{value:.1f} cores" if resource == "cpu" else f"{value / 2**30:.1f} GiB"


def size_class(node: NodeInfo) -> int:
    """The node's size in half-octaves of its CPU cores times its memory GiB (8 CPU /
    32 GiB: 8; 32 CPU / 128 GiB: 12): nodes of one instance type share it even where
    their allocatable differs by a little, and a node twice as large in both is two
    classes up. Consolidation tries the smallest classes first and packs onto the
    largest: the nodes left hold the pods in the fewest nodes when the small ones go
    (what is left must hold the cluster's requests; only the allocatable of the nodes
    that go decides how many may go)."""
    cpu = node.allocatable.get("cpu")
    memory_gib = node.allocatable.get("memory") / 2**30
    return round(math.log2(max(cpu, 1e-3)) + math.log2(max(memory_gib, 1e-3)))


def _destination_key(room: Room) -> tuple[int, float, str]:
    return (-size_class(room.node), _free_share(room), room.node.name)


def _free_share(room: Room) -> float:
    """The share of the room's node left unrequested, its scarcest resource."""
    allocatable = room.node.allocatable
    return min(
        (
            room.free_requests.get(r) / allocatable.get(r)
            for r in RESOURCES
            if allocatable.get(r) > 0
        ),
        default=0.0,
    )
