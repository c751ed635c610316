"""Every node's verdict under one policy: its entry, and the verdict index built from them.

``Verdicts`` is everything the node table derives from a policy, in one frozen object:
the policy itself, the annotation keys it reads, each node's ``NodeEntry``, the
``VerdictIndex`` that answers the verbs, which nodes are rejected and on which metric,
and the two heaps of instants when an entry changes with the clock. The table builds a
new one whole for a new policy and swaps it in with one assignment
(``NodeTable.set_policy``), so no request meets half of one. Its fields are never
reassigned; their contents change as nodes do.
"""

from __future__ import annotations

import heapq
import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from app.extender.index import VerdictIndex
from app.extender.reserve import NOTHING_UNSAMPLED, Reserve, Unsampled
from app.load import (
    HOT_VALUE_KEY,
    Measurement,
    NodeLoad,
    evaluate_node,
    headroom,
    judged_by,
    measure,
    node_verdict,
)
from app.objects import CPU, MEMORY, Resources
from app.policy import Policy, PoolMatch

log = logging.getLogger(__name__)

AnnotationKey = tuple[str | None, ...]
NO_LABELS: Mapping[str, str] = MappingProxyType({})


@dataclass(slots=True)
class NodeEntry:
    name: str
    annotations: Mapping[str, str]  # only loadaware's keys
    key: AnnotationKey  # the relevant annotation values, to detect changes cheaply
    load: NodeLoad
    last_seen_s: float
    measurement: Measurement  # the annotations as read; reused while only ``unsampled`` changes
    unsampled: Unsampled  # what the samples do not contain yet (already inside ``load``)
    # How much more cpu and memory (fractions of allocatable) changes none of its answers
    # (load model's headroom), and what reservations made since ``load`` was assessed
    # have added, too little to change them; the earliest instant the estimate changes.
    room_cpu: float
    room_memory: float
    # What the verdict index is told, worked out once per assessment, not per reservation:
    # whether it may be the preferred node (wire.can_be_preferred), what cpu and memory
    # (fractions) may still be added before a limit rejects it (wire.limit_room, inf
    # where no limit applies), and its allocatable (None: unknown, no room judged).
    preferable: bool
    limit_cpu: float
    limit_memory: float
    allocatable: Resources | None
    unassessed_cpu: float = 0.0
    unassessed_memory: float = 0.0
    estimate_due_s: float = math.inf
    # The node's labels (the API server's mapping, not a copy) and its node pool, resolved
    # when the node or the policy changes, never per request (app/policy/pools.py).
    labels: Mapping[str, str] = field(default_factory=lambda: NO_LABELS)
    pool: PoolMatch[Policy] | None = None  # None: the policy has no pools

    @property
    def reason(self) -> str | None:
        return self.load.reason

    def rooms(self) -> tuple[float, float]:
        """The cpu cores and memory bytes it can still take under its limits, after the
        reservations not yet assessed (inf: no limit, or its allocatable is unknown)."""
        allocatable = self.allocatable
        if allocatable is None:
            return math.inf, math.inf
        return (
            _absolute(self.limit_cpu, self.unassessed_cpu, allocatable.cpu_cores),
            _absolute(self.limit_memory, self.unassessed_memory, allocatable.memory_bytes),
        )


DueAt = Callable[[NodeEntry], float]


def verdict_due(entry: NodeEntry) -> float:
    return entry.load.recheck_at_s


def estimate_due(entry: NodeEntry) -> float:
    return entry.estimate_due_s


@dataclass(frozen=True, slots=True)
class Verdicts:
    """Every node's entry and answers under ``policy``."""

    policy: Policy
    keys: tuple[str, ...]  # the annotations the policy reads
    entries: dict[str, NodeEntry]
    index: VerdictIndex
    rejected_metric: dict[str, str]  # name → the metric it is rejected on
    metric_of_reason: dict[str, str]  # filter reason → its metric
    rechecks: list[tuple[float, str]]  # a heap of (load.recheck_at_s, name)
    expiries: list[tuple[float, str]]  # a heap of (estimate_due_s, name)

    @classmethod
    def empty(cls, policy: Policy, index: VerdictIndex, now_s: float) -> Verdicts:
        """No node yet, answered by ``index`` (empty)."""
        # A node without annotations passes and scores as one without data.
        index.unknown_score = evaluate_node({}, policy, now_s).extender_score
        return cls(policy, (*policy.metrics, HOT_VALUE_KEY), {}, index, {}, {}, [], [])

    def key_of(self, annotations: Mapping[str, str]) -> AnnotationKey:
        return tuple(map(annotations.get, self.keys))

    def store(
        self,
        name: str,
        annotations: Mapping[str, str],
        now_s: float,
        last_seen_s: float,
        reserve: Reserve | None,
        measurement: Measurement | None = None,
        previous: NodeEntry | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> NodeEntry:
        """Assess the node anew and record its entry and answers. ``labels`` are the
        node's, when they may have changed (its pool is resolved again from them); None
        keeps the pool the node's entry has."""
        if previous is None:
            previous = self.entries.get(name)
        if labels is None and previous is not None:
            labels, pool = previous.labels, previous.pool
        else:
            labels = NO_LABELS if labels is None else labels
            pool = self.policy.node_pools.match(labels) if self.policy.spec.node_pools else None
        policy = self.policy if pool is None else pool.judged_by
        relevant = {k: v for k in self.keys if (v := annotations.get(k)) is not None}
        if measurement is None:
            measurement = measure(relevant, policy, now_s)
        policy = judged_by(policy, measurement)  # beside the classes the node runs
        unsampled = NOTHING_UNSAMPLED
        if reserve is not None and reserve.tracks(name):
            unsampled = reserve.unsampled(name, measurement.freshest_sample_s(), now_s)
        verdict = node_verdict(measurement, unsampled.fractions, policy)
        load = verdict.load
        # Without a reserve no estimate is known, so no pod is judged against the room.
        rooms = headroom(load, measurement, policy) if reserve is not None else {}
        limits = verdict.room if reserve is not None else {}
        entry = NodeEntry(
            name,
            relevant,
            self.key_of(relevant),
            load,
            last_seen_s,
            measurement,
            unsampled,
            rooms.get(CPU, 0.0),
            rooms.get(MEMORY, 0.0),
            verdict.preferable,
            limits.get(CPU, math.inf),
            limits.get(MEMORY, math.inf),
            None if reserve is None else reserve.allocatable(name),
            estimate_due_s=unsampled.changes_at_s,
            labels=labels,
            pool=pool,
        )
        self.entries[name] = entry
        if load.overloads:
            first = load.overloads[0]
            self.rejected_metric[name] = self.metric_of_reason[first.reason] = first.metric
        else:
            self.rejected_metric.pop(name, None)
        self.set_index(entry)
        if not math.isinf(load.recheck_at_s):
            self.push(self.rechecks, load.recheck_at_s, name, verdict_due)
        if not math.isinf(unsampled.changes_at_s):
            self.push(self.expiries, unsampled.changes_at_s, name, estimate_due)
        if (previous.reason if previous else None) != entry.reason:
            _log_verdict_change(entry, previous)
        return entry

    def set_index(self, entry: NodeEntry) -> None:
        """The node's answers in the verdict index: score, reason, whether it may be the
        preferred node, and its room under the limits in cores and bytes."""
        cpu_room, memory_room = entry.rooms()
        load = entry.load
        self.index.set(
            entry.name, load.extender_score, load.reason, entry.preferable, cpu_room, memory_room
        )

    def remove(self, name: str) -> None:
        self.entries.pop(name, None)
        self.rejected_metric.pop(name, None)
        self.index.discard(name)

    def push(self, heap: list[tuple[float, str]], at_s: float, name: str, due_at: DueAt) -> None:
        heapq.heappush(heap, (at_s, name))
        if len(heap) <= 4 * len(self.entries) + 1024:
            return
        # Replaced entries leave items behind; rebuild before they outnumber live ones.
        heap[:] = [(due_at(e), e.name) for e in self.entries.values() if not math.isinf(due_at(e))]
        heapq.heapify(heap)


def _log_verdict_change(entry: NodeEntry, previous: NodeEntry | None) -> None:
    if entry.load.overloads:
        details = ", ".join(
            f"{o.metric}={o.usage_fraction:.3f} > {o.limit_fraction:g}"
            for o in entry.load.overloads
        )
        log.info("node %s is overloaded and will be filtered out: %s", entry.name, details)
    elif previous is not None and previous.reason is not None:
        log.info("node %s is no longer overloaded", entry.name)


def _absolute(room_fraction: float, unassessed_fraction: float, allocatable: float) -> float:
    """A room left after reservations not yet assessed, in the resource's own unit."""
    if math.isinf(room_fraction):
        return math.inf
    return max(0.0, room_fraction - unassessed_fraction) * allocatable
