"""Per-node verdicts and scores, computed when a node changes rather than per request.

A verdict depends only on a node's loadaware annotations, the policy and the clock,
so the table recomputes a node's ``NodeEntry`` when its annotations change, when the
policy changes, when its unsampled estimate changes (a pod bound or reserved on it,
see ``reserve.py``), or when the clock changes it. Two clocks are kept apart:
``refresh`` (called by every verb) handles the instants that change what the load
model reads (a value goes stale, a hot value expires), exactly; ``expire_estimates``
(called about once a second by the extender, off the request path) handles estimated
pods ageing out and reservations expiring, which may well be a second late. Each
recomputed verdict and score goes into ``index``, the VerdictIndex that answers filter
and prioritize requests whole. Everything derived from the policy is one frozen
``Verdicts`` (``verdicts.py``), which a policy change replaces in one assignment.
"""

from __future__ import annotations

import heapq
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

from app.extender.index import VerdictIndex, implementation_of, new_verdict_index
from app.extender.reserve import Reserve
from app.extender.verdicts import (
    AnnotationKey,
    DueAt,
    NodeEntry,
    Verdicts,
    estimate_due,
    verdict_due,
)
from app.policy import Policy

log = logging.getLogger(__name__)


class Followers(Protocol):
    """Tables kept beside this one, node for node (``app/extender/classes.py``: one per
    class of pods): told every change this table is told."""

    active: bool  # some table follows: a pod may be judged by one of them

    def table_for(self, pod: Mapping[str, Any]) -> NodeTable | None: ...
    def yielding_for(self, pod: Mapping[str, Any]) -> NodeTable | None: ...
    def upsert(
        self, name: str, annotations: Mapping[str, str], labels: Mapping[str, str] | None
    ) -> None: ...
    def recompute(self, name: str) -> None: ...
    def remove(self, name: str) -> None: ...
    def add_reserved(self, name: str, cpu: float, memory: float, expires_at_s: float) -> None: ...
    def refresh(self, now_s: float) -> None: ...
    def expire_estimates(self, now_s: float) -> None: ...
    def set_policy(self, policy: Policy) -> None: ...


def _warn_about_overlap(entry: NodeEntry, logged: set[str]) -> None:
    """Log once per node that two or more pools select it (app/policy/pools.py);
    ``logged``: the nodes logged, kept by the table."""
    pool = entry.pool
    if pool is None or not pool.overlap:
        logged.discard(entry.name)
        return
    if entry.name not in logged:
        logged.add(entry.name)
        log.error(
            "node %s is selected by node pools %s of the policy; it is judged by the "
            "policy's own limits until one pool selects it (a node must be in one pool "
            "at most)",
            entry.name,
            ", ".join(pool.overlap),
        )


class NodeTable:
    """The extender's view of every node it knows: name → precomputed verdict and score."""

    def __init__(
        self,
        policy: Policy,
        clock: Callable[[], float] = time.time,
        index: VerdictIndex | None = None,
        reserve: Reserve | None = None,
        followers: Followers | None = None,
        estimate_every_node: bool = False,
    ) -> None:
        self._reserve = reserve
        # A class's table (classes.py): every node passes a pod only where the pod's own
        # estimate fits its room under the limits; in any table, a node in a node pool
        # does too (``classes.short_of_room``). ``estimate_filters``: some node may.
        self.estimate_every_node = estimate_every_node
        self.estimate_filters = estimate_every_node or bool(policy.spec.node_pools)
        self._clock = clock
        self._overlapping: set[str] = set()  # nodes logged as in two or more pools
        index = index if index is not None else new_verdict_index()
        self._verdicts = Verdicts.empty(policy, index, clock())
        self.followers = followers
        # The followers while some table follows, else None: one attribute check a request.
        self._following: Followers | None = None
        if followers is not None:
            followers.set_policy(policy)
            self._following = followers if followers.active else None

    def table_for(self, pod: Mapping[str, Any]) -> NodeTable:
        """The table a pod is judged by: its class's (``followers``), or this one."""
        following = self._following
        return self if following is None else following.table_for(pod) or self

    @property
    def has_classes(self) -> bool:  # whether a pod may be judged by a class's table
        return self._following is not None

    def yielding_for(self, pod: Mapping[str, Any]) -> NodeTable | None:
        """The table a pod of a class is judged by where its class's passes no node:
        its class's without the limits on its own usage (``PodClasses.yielding``);
        None: no class, or a class without such a limit."""
        return None if self._following is None else self._following.yielding_for(pod)

    @property
    def policy(self) -> Policy:
        return self._verdicts.policy

    @property
    def index(self) -> VerdictIndex:
        return self._verdicts.index

    @property
    def rejected_metric(self) -> Mapping[str, str]:
        """Name → the metric it is rejected on."""
        return self._verdicts.rejected_metric

    @property
    def metric_of_reason(self) -> Mapping[str, str]:
        """Filter reason → its metric."""
        return self._verdicts.metric_of_reason

    def __len__(self) -> int:
        return len(self._verdicts.entries)

    def __iter__(self) -> Iterator[NodeEntry]:
        return iter(list(self._verdicts.entries.values()))

    def get(self, name: str) -> NodeEntry | None:
        return self._verdicts.entries.get(name)

    def key_of(self, annotations: Mapping[str, str]) -> AnnotationKey:
        return self._verdicts.key_of(annotations)

    def set_policy(self, policy: Policy) -> None:
        """Recompute every node under ``policy`` into new verdicts, then swap them in with
        one assignment.

        If anything fails on the way, the old verdicts stay in force, untouched, and the
        error propagates: a request never meets a half-built table (this runs on the
        event loop, between requests)."""
        now_s = self._clock()
        old = self._verdicts
        index = new_verdict_index(implementation_of(old.index))  # none of the old reasons
        verdicts = Verdicts.empty(policy, index, now_s)
        for name, entry in old.entries.items():
            verdicts.store(
                name,
                entry.annotations,
                now_s,
                entry.last_seen_s,
                self._reserve,
                previous=entry,
                labels=entry.labels,
            )
        if self.followers is not None:
            self.followers.set_policy(policy)
            self._following = self.followers if self.followers.active else None
        self._verdicts = verdicts
        self.estimate_filters = self.estimate_every_node or bool(policy.spec.node_pools)
        self._overlapping &= set(verdicts.entries)
        for entry in verdicts.entries.values():
            _warn_about_overlap(entry, self._overlapping)

    def upsert(
        self, name: str, annotations: Mapping[str, str], labels: Mapping[str, str] | None = None
    ) -> NodeEntry:
        """Record a node's current annotations and labels; recompute only if they changed.
        The labels count only under a policy with node pools, and only for the pool
        they put the node in; None: the labels the node had (none for a new node)."""
        now_s = self._clock()
        verdicts = self._verdicts
        entry = verdicts.entries.get(name)
        if self._following is not None:
            self._following.upsert(name, annotations, labels)
        if (
            entry is not None
            and entry.key == verdicts.key_of(annotations)
            and (labels is None or not self._pool_changed(entry, labels))
        ):
            entry.last_seen_s = now_s
            return entry
        entry = verdicts.store(name, annotations, now_s, now_s, self._reserve, labels=labels)
        _warn_about_overlap(entry, self._overlapping)
        return entry

    def _pool_changed(self, entry: NodeEntry, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` put the node in another pool than its entry's (keeping the
        new labels on the entry when they do not)."""
        policy = self._verdicts.policy
        if not policy.spec.node_pools:
            entry.labels = labels
            return False
        if labels == entry.labels:  # most often, in full-nodes mode: every request
            return False
        pool = policy.node_pools.match(labels)
        if entry.pool is not None and (pool.pool, pool.overlap) == (
            entry.pool.pool,
            entry.pool.overlap,
        ):
            entry.labels = labels
            return False
        return True

    @property
    def overlapping(self) -> frozenset[str]:
        """The nodes two or more node pools select, judged by the defaults."""
        return frozenset(self._overlapping)

    def recompute(self, name: str) -> None:
        """Recompute a node whose unsampled estimate changed (a binding, a reservation)."""
        if self._following is not None:
            self._following.recompute(name)
        verdicts = self._verdicts
        entry = verdicts.entries.get(name)
        if entry is None:
            return
        now_s = self._clock()
        # The annotations are unchanged: read them again only if the clock changed them.
        measurement = entry.measurement if now_s < entry.measurement.changes_at_s else None
        verdicts.store(
            name, entry.annotations, now_s, entry.last_seen_s, self._reserve, measurement
        )

    def remove(self, name: str) -> None:
        self._verdicts.remove(name)
        self._overlapping.discard(name)
        if self._following is not None:
            self._following.remove(name)

    def prune_unseen(self, older_than_s: float) -> int:
        """Drop entries not seen for a while (full-nodes mode has no delete events)."""
        cutoff_s = self._clock() - older_than_s
        entries = self._verdicts.entries
        stale = [name for name, e in entries.items() if e.last_seen_s < cutoff_s]
        for name in stale:
            self.remove(name)
        return len(stale)

    def forget_least_recently_seen(self, count: int) -> int:
        """Drop the ``count`` entries seen least recently; returns how many went."""
        if count <= 0:
            return 0
        entries = self._verdicts.entries.values()
        oldest = heapq.nsmallest(count, entries, key=lambda e: e.last_seen_s)
        for entry in oldest:
            self.remove(entry.name)
        return len(oldest)

    def refresh(self, now_s: float) -> None:
        """Recompute the entries whose verdict the clock has changed; cheap when none has."""
        rechecks = self._verdicts.rechecks
        if rechecks and rechecks[0][0] <= now_s:  # checked here: each verb call asks
            self._recompute_due(rechecks, now_s, verdict_due)
        if self._following is not None:
            self._following.refresh(now_s)

    def expire_estimates(self, now_s: float) -> None:
        """Recompute the entries whose estimated pods or reservations have expired."""
        self._recompute_due(self._verdicts.expiries, now_s, estimate_due)
        if self._following is not None:
            self._following.expire_estimates(now_s)

    def _recompute_due(self, heap: list[tuple[float, str]], now_s: float, due_at: DueAt) -> None:
        verdicts = self._verdicts
        while heap and heap[0][0] <= now_s:
            at_s, name = heapq.heappop(heap)
            entry = verdicts.entries.get(name)
            # Heap items of replaced or removed entries are skipped, not searched for.
            if entry is not None and due_at(entry) == at_s:
                verdicts.store(name, entry.annotations, now_s, entry.last_seen_s, self._reserve)

    def lookup(self, name: str, now_s: float) -> NodeEntry | None:
        """A node's entry with everything the clock and reservations changed applied."""
        self.refresh(now_s)
        self.expire_estimates(now_s)
        entry = self.get(name)
        if entry is not None and (entry.unassessed_cpu or entry.unassessed_memory):
            self.recompute(name)
            entry = self.get(name)
        return entry

    def add_reserved(
        self, name: str, cpu_fraction: float, memory_fraction: float, expires_at_s: float
    ) -> None:
        """A reservation was added on ``name``: re-assess the node only if it could change
        the node's answers (its headroom), else just note it."""
        if self._following is not None:
            self._following.add_reserved(name, cpu_fraction, memory_fraction, expires_at_s)
        verdicts = self._verdicts
        entry = verdicts.entries.get(name)
        if entry is None:
            return
        cpu = entry.unassessed_cpu + cpu_fraction
        memory = entry.unassessed_memory + memory_fraction
        if cpu > entry.room_cpu or memory > entry.room_memory:
            self.recompute(name)
            return
        entry.unassessed_cpu, entry.unassessed_memory = cpu, memory
        verdicts.set_index(entry)  # its room for the next pod is smaller by the reservation
        if expires_at_s < entry.estimate_due_s:
            entry.estimate_due_s = expires_at_s
            verdicts.push(verdicts.expiries, expires_at_s, name, estimate_due)

    @property
    def judges_room(self) -> bool:
        """Whether nodes carry their room under the limits: only with the estimate's
        reserve (and allocatable) is a pod's estimate known and judged against it."""
        return self._reserve is not None
