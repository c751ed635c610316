"""Per-node verdicts and scores, computed when a node changes rather than per request.

A verdict depends only on a node's loadaware annotations, the policy and the clock,
so the table recomputes a node's ``NodeEntry`` when its annotations change, when the
policy changes, when its estimated addition changes (a pod bound or reserved on it,
see ``ledger.py``), or when the clock changes it. Two clocks are kept apart:
``refresh`` (called by every verb) handles the instants that change what the load
model reads (a value goes stale, a hot value expires), exactly; ``expire_estimates``
(called about once a second by the extender, off the request path) handles estimated
pods ageing out and reservations expiring, which may well be a second late. Each recomputed verdict
and score goes into ``index``, the VerdictIndex that answers filter and prioritize
requests whole.
"""

from __future__ import annotations

import heapq
import logging
import math
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from app.extender.index import VerdictIndex, implementation_of, new_verdict_index
from app.extender.ledger import NO_ADDITION, Addition, Ledger
from app.load import (
    HOT_VALUE_KEY,
    Measurement,
    NodeLoad,
    assess,
    can_be_preferred,
    evaluate_node,
    headroom,
    limit_room,
    measure,
)
from app.objects import CPU, MEMORY
from app.policy import Policy

log = logging.getLogger(__name__)

AnnotationKey = tuple[str | None, ...]


@dataclass(slots=True)
class NodeEntry:
    name: str
    annotations: Mapping[str, str]  # only loadaware's keys
    key: AnnotationKey  # the relevant annotation values, to detect changes cheaply
    load: NodeLoad
    last_seen_s: float
    measurement: Measurement  # the annotations as read; reused while only the addition changes
    addition: Addition  # what the samples do not contain yet (already inside ``load``)
    # How much more cpu and memory (fractions of allocatable) changes none of its answers
    # (load model's headroom), and what reservations made since ``load`` was assessed
    # have added, too little to change them; the earliest instant the estimate changes.
    room_cpu: float
    room_memory: float
    # Per resource, what may still be added before a limit rejects it (wire.limit_room).
    limit_room: Mapping[str, float]
    unassessed_cpu: float = 0.0
    unassessed_memory: float = 0.0
    estimate_due_s: float = math.inf

    @property
    def reason(self) -> str | None:
        return self.load.reason


class NodeTable:
    """The extender's view of every node it knows: name → precomputed verdict and score."""

    def __init__(
        self,
        policy: Policy,
        clock: Callable[[], float] = time.time,
        index: VerdictIndex | None = None,
        ledger: Ledger | None = None,
    ) -> None:
        self._policy = policy
        self._ledger = ledger
        self._clock = clock
        self._keys = self._relevant_keys(policy)
        self._entries: dict[str, NodeEntry] = {}
        self.index = index if index is not None else new_verdict_index()
        self.rejected_metric: dict[str, str] = {}  # name → the metric it is rejected on
        self.metric_of_reason: dict[str, str] = {}  # filter reason → its metric
        self._rechecks: list[tuple[float, str]] = []  # a heap of (load.recheck_at_s, name)
        self._expiries: list[tuple[float, str]] = []  # (addition.changes_at_s, name)
        # A node without annotations passes and scores as one without data.
        self.index.unknown_score = evaluate_node({}, policy, clock()).extender_score

    @staticmethod
    def _relevant_keys(policy: Policy) -> tuple[str, ...]:
        return (*policy.metrics, HOT_VALUE_KEY)

    @property
    def policy(self) -> Policy:
        return self._policy

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[NodeEntry]:
        return iter(list(self._entries.values()))

    def get(self, name: str) -> NodeEntry | None:
        return self._entries.get(name)

    def key_of(self, annotations: Mapping[str, str]) -> AnnotationKey:
        return tuple(map(annotations.get, self._keys))

    def set_policy(self, policy: Policy) -> None:
        """Recompute every node under ``policy`` into new structures, then swap them in.

        If anything fails on the way, the old policy, entries and index stay exactly as
        they were and the error propagates: a request never meets a half-built table
        (this runs on the event loop, between requests)."""
        saved = (
            self._policy,
            self._keys,
            self._entries,
            self.index,
            self.rejected_metric,
            self.metric_of_reason,
            self._rechecks,
            self._expiries,
        )
        now_s = self._clock()
        try:
            index = new_verdict_index(implementation_of(self.index))
            index.unknown_score = evaluate_node({}, policy, now_s).extender_score
            self._policy = policy
            self._keys = self._relevant_keys(policy)
            self._entries = {}
            self.index = index  # drops the old policy's reasons too
            self.rejected_metric = {}
            self.metric_of_reason = {}
            self._rechecks = []
            self._expiries = []
            for name, entry in saved[2].items():
                self._store(name, entry.annotations, now_s, entry.last_seen_s, previous=entry)
        except BaseException:
            (
                self._policy,
                self._keys,
                self._entries,
                self.index,
                self.rejected_metric,
                self.metric_of_reason,
                self._rechecks,
                self._expiries,
            ) = saved
            raise

    def upsert(self, name: str, annotations: Mapping[str, str]) -> NodeEntry:
        """Record a node's current annotations; recompute only if they changed."""
        now_s = self._clock()
        entry = self._entries.get(name)
        if entry is not None and entry.key == self.key_of(annotations):
            entry.last_seen_s = now_s
            return entry
        return self._store(name, annotations, now_s, now_s)

    def recompute(self, name: str) -> None:
        """Recompute a node whose estimated addition changed (a binding, a reservation)."""
        entry = self._entries.get(name)
        if entry is None:
            return
        now_s = self._clock()
        # The annotations are unchanged: read them again only if the clock changed them.
        measurement = entry.measurement if now_s < entry.measurement.changes_at_s else None
        self._store(name, entry.annotations, now_s, entry.last_seen_s, measurement)

    def remove(self, name: str) -> None:
        self._entries.pop(name, None)
        self.rejected_metric.pop(name, None)
        self.index.discard(name)

    def prune_unseen(self, older_than_s: float) -> int:
        """Drop entries not seen for a while (full-nodes mode has no delete events)."""
        cutoff_s = self._clock() - older_than_s
        stale = [name for name, e in self._entries.items() if e.last_seen_s < cutoff_s]
        for name in stale:
            self.remove(name)
        return len(stale)

    def forget_least_recently_seen(self, count: int) -> int:
        """Drop the ``count`` entries seen least recently; returns how many went."""
        if count <= 0:
            return 0
        oldest = heapq.nsmallest(count, self._entries.values(), key=lambda e: e.last_seen_s)
        for entry in oldest:
            self.remove(entry.name)
        return len(oldest)

    def refresh(self, now_s: float) -> None:
        """Recompute the entries whose verdict the clock has changed; cheap when none has."""
        self._recompute_due(self._rechecks, now_s, _verdict_due)

    def expire_estimates(self, now_s: float) -> None:
        """Recompute the entries whose estimated pods or reservations have expired."""
        self._recompute_due(self._expiries, now_s, _estimate_due)

    def _recompute_due(self, heap: list[tuple[float, str]], now_s: float, due_at: DueAt) -> None:
        while heap and heap[0][0] <= now_s:
            at_s, name = heapq.heappop(heap)
            entry = self._entries.get(name)
            # Heap items of replaced or removed entries are skipped, not searched for.
            if entry is not None and due_at(entry) == at_s:
                self._store(name, entry.annotations, now_s, entry.last_seen_s)

    def lookup(self, name: str, now_s: float) -> NodeEntry | None:
        """A node's entry with everything the clock and reservations changed applied."""
        self.refresh(now_s)
        self.expire_estimates(now_s)
        entry = self._entries.get(name)
        if entry is not None and (entry.unassessed_cpu or entry.unassessed_memory):
            self.recompute(name)
            entry = self._entries.get(name)
        return entry

    def add_reserved(
        self, name: str, cpu_fraction: float, memory_fraction: float, expires_at_s: float
    ) -> None:
        """A reservation was added on ``name``: re-assess the node only if it could change
        the node's answers (its headroom), else just note it."""
        entry = self._entries.get(name)
        if entry is None:
            return
        cpu = entry.unassessed_cpu + cpu_fraction
        memory = entry.unassessed_memory + memory_fraction
        if cpu > entry.room_cpu or memory > entry.room_memory:
            self.recompute(name)
            return
        entry.unassessed_cpu, entry.unassessed_memory = cpu, memory
        self._set_index(entry)  # its room for the next pod is smaller by the reservation
        if expires_at_s < entry.estimate_due_s:
            entry.estimate_due_s = expires_at_s
            self._expiries = self._push(self._expiries, expires_at_s, name, _estimate_due)

    @property
    def judges_room(self) -> bool:
        """Whether nodes carry their room under the limits: only with the estimate's
        ledger (and allocatable) is a pod's estimate known and judged against it."""
        return self._ledger is not None

    def _set_index(self, entry: NodeEntry) -> None:
        """The node's answers in the verdict index: score, reason, whether it may be the
        preferred node, and its room under the limits in cores and bytes."""
        load = entry.load
        allocatable = self._ledger.allocatable(entry.name) if self._ledger is not None else None
        cpu_room = memory_room = math.inf
        if allocatable is not None:
            cpu_room = _absolute(
                entry.limit_room.get(CPU, math.inf), entry.unassessed_cpu, allocatable.cpu_cores
            )
            memory_room = _absolute(
                entry.limit_room.get(MEMORY, math.inf),
                entry.unassessed_memory,
                allocatable.memory_bytes,
            )
        self.index.set(
            entry.name,
            load.extender_score,
            load.reason,
            can_be_preferred(load),
            cpu_room,
            memory_room,
        )

    def _store(
        self,
        name: str,
        annotations: Mapping[str, str],
        now_s: float,
        last_seen_s: float,
        measurement: Measurement | None = None,
        *,
        previous: NodeEntry | None = None,
    ) -> NodeEntry:
        relevant = {k: v for k in self._keys if (v := annotations.get(k)) is not None}
        if measurement is None:
            measurement = measure(relevant, self._policy, now_s)
        addition = NO_ADDITION
        if self._ledger is not None and self._ledger.tracks(name):
            sample_at_s = measurement.freshest_sample_s()
            addition = self._ledger.addition(name, sample_at_s, now_s)
        load = assess(measurement, self._policy, addition.fractions)
        rooms = headroom(load, measurement, self._policy) if self._ledger is not None else {}
        # Without a ledger no estimate is known, so no pod is judged against the room.
        limits = limit_room(load, self._policy) if self._ledger is not None else {}
        entry = NodeEntry(
            name,
            relevant,
            self.key_of(relevant),
            load,
            last_seen_s,
            measurement,
            addition,
            rooms.get(CPU, 0.0),
            rooms.get(MEMORY, 0.0),
            limits,
            estimate_due_s=addition.changes_at_s,
        )
        if previous is None:
            previous = self._entries.get(name)
        self._entries[name] = entry
        if load.overloads:
            self.rejected_metric[name] = self.metric_of_reason[load.overloads[0].reason] = (
                load.overloads[0].metric
            )
        else:
            self.rejected_metric.pop(name, None)
        self._set_index(entry)
        if not math.isinf(load.recheck_at_s):
            self._rechecks = self._push(self._rechecks, load.recheck_at_s, name, _verdict_due)
        if not math.isinf(addition.changes_at_s):
            self._expiries = self._push(self._expiries, addition.changes_at_s, name, _estimate_due)
        if (previous.reason if previous else None) != entry.reason:
            _log_verdict_change(entry, previous)
        return entry

    def _push(
        self, heap: list[tuple[float, str]], at_s: float, name: str, due_at: DueAt
    ) -> list[tuple[float, str]]:
        heapq.heappush(heap, (at_s, name))
        if len(heap) <= 4 * len(self._entries) + 1024:
            return heap
        # Replaced entries leave items behind; rebuild before they outnumber live ones.
        rebuilt = [(due_at(e), e.name) for e in self._entries.values() if not math.isinf(due_at(e))]
        heapq.heapify(rebuilt)
        return rebuilt


DueAt = Callable[[NodeEntry], float]


def _verdict_due(entry: NodeEntry) -> float:
    return entry.load.recheck_at_s


def _estimate_due(entry: NodeEntry) -> float:
    return entry.estimate_due_s


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
