"""Drained nodes keep their soft taint (``app.load.drained``): the descheduler's recent
evictions, read for the rule, and the hold they give.

The annotator reads them from the descheduler's state ConfigMap (``app/kube/state.py``:
per eviction its source node, the usage it moved and when), which only the
descheduler's Role may write: not from Events, pods or Nodes, which tenants or a node's
kubelet can write (docs/security.md). It reads at most every ``READ_EVERY_S`` (the
descheduler writes once per run, every few minutes) and keeps what it read for
``DRAINED_WINDOW_S`` (the descheduler's state keeps its evictions for about an hour);
a failed read (no permission, the API unreachable, a document that is not a state
document) is said once and leaves the hold to what was read before: at worst a
drained node loses its taint as it did without the hold.

The guard ahead of the replacements (``app.load.landing_guard``) reads the same
evictions, and the pods bound within ``GUARD_WINDOW_S`` with their workload, as the pod
watch sees them (``bound``, from ``BindingObserver``): it stands down while one of them,
bound within ``ARRIVAL_WINDOW_S``, is not a replacement (``other_arrivals``).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Mapping, Sequence

from app.annotator.settings import DeschedulerState
from app.kube import KubeClient, NodeInfo, StateStore
from app.load import (
    DRAINED_WINDOW_S,
    GUARD_WINDOW_S,
    Measured,
    Measurement,
    guard_landings,
    hold_drained,
    largest_left,
    largest_moved,
    measure,
    other_arrivals,
    recent_evictions,
)
from app.objects import EvictionRecord, Resources
from app.policy import Policy

__all__ = ["READ_EVERY_S", "DrainedNodes"]

log = logging.getLogger(__name__)

READ_EVERY_S = 60.0


class DrainedNodes:
    """The descheduler's evictions within ``DRAINED_WINDOW_S``, from its state
    ConfigMap (``get`` on that one ConfigMap: app/kube/permissions.py), and the hold
    they give; ``store`` None: nothing read, nothing held."""

    def __init__(self, store: StateStore | None = None) -> None:
        self._store = store
        self._next_read_s = float("-inf")
        self._failing = False
        self._evicted: dict[str, EvictionRecord] = {}  # by pod UID
        self._held: set[str] = set()  # nodes held last round (logged as they start)
        self._bound: deque[tuple[float, str | None]] = deque()  # within GUARD_WINDOW_S
        self._stood_down = False  # the guard stood down last round (logged as it starts)

    @classmethod
    def of(cls, client: KubeClient, state: DeschedulerState | None) -> DrainedNodes:
        """Reading ``state`` through ``client``; None: nothing read."""
        return cls(StateStore(client, state.namespace, state.name) if state else None)

    async def hold(
        self,
        warm_at_s: Mapping[str, float],
        nodes: Mapping[str, NodeInfo],
        policy: Policy,
        now_s: float,
        release_margin: float,
    ) -> dict[str, float]:
        """The rule's memory with each tainted node the largest pod evicted from it
        would take back over a limit held from ``now_s`` (``hold_drained``)."""
        self._evicted = recent_evictions(self._evicted, await self._read(now_s), now_s)
        if not self._evicted:
            self._held = set()
            return dict(warm_at_s)
        largest = largest_left(self._evicted.values())
        why: dict[str, str] = {}
        measured = _measured(nodes, policy, now_s)
        held = hold_drained(warm_at_s, largest, measured, now_s, release_margin, why)
        for name in sorted(why.keys() - self._held):
            log.info("soft taint kept on node %s, drained by the descheduler: %s", name, why[name])
        self._held = set(why)
        return held

    def bound(self, at_s: float, workload: str | None) -> None:
        """A pod of ``workload`` (None: a bare pod) was seen bound at ``at_s``."""
        self._bound.append((at_s, workload))
        while self._bound and self._bound[0][0] < at_s - GUARD_WINDOW_S:
            self._bound.popleft()

    def guard(
        self,
        untainted: Sequence[str],
        nodes: Mapping[str, NodeInfo],
        policy: Policy,
        now_s: float,
        release_margin: float,
    ) -> dict[str, str]:
        """Of the ``untainted`` nodes, those the guard ahead of the replacements taints
        this round (``guard_landings`` over the evictions ``hold`` last read), each with
        why; none while a pod that is not a replacement was bound lately."""
        moved = largest_moved(self._evicted.values(), now_s)
        if moved is None:
            return {}
        while self._bound and self._bound[0][0] < now_s - GUARD_WINDOW_S:
            self._bound.popleft()
        stood_down = other_arrivals(self._bound, self._evicted.values(), now_s)
        if stood_down and not self._stood_down:
            log.info("soft-taint guard stands down: a pod that is not a replacement was bound")
        self._stood_down = stood_down
        if stood_down:
            return {}
        why: dict[str, str] = {}
        measured = _measured(nodes, policy, now_s)
        guard_landings(moved, untainted, measured, release_margin, len(nodes), why)
        return why

    async def _read(self, now_s: float) -> tuple[EvictionRecord, ...]:
        """What the descheduler recorded, if a read is due (else nothing new)."""
        if self._store is None or now_s < self._next_read_s:
            return ()
        self._next_read_s = now_s + READ_EVERY_S
        try:
            saved_state = await self._store.load(now_s, now_s - DRAINED_WINDOW_S)
        except Exception as error:  # ApiError, StateUnreadable, the transport: fail open
            if not self._failing:
                log.warning(
                    "cannot read the descheduler's evictions from %s (%s): drained nodes "
                    "keep their soft taint only as long as already read; trying again "
                    "every %.0fs",
                    self._store.where,
                    error,
                    READ_EVERY_S,
                )
            self._failing = True
            return ()
        if self._failing:
            log.info("reading the descheduler's evictions from %s again", self._store.where)
        self._failing = False
        return tuple(saved_state.evictions.values())


def _measured(nodes: Mapping[str, NodeInfo], policy: Policy, now_s: float) -> Measured:
    """Each node's Measurement now, the policy that judges it (its pool's, if any) and
    its allocatable; None for a node not in ``nodes``."""

    def measured(name: str) -> tuple[Measurement, Policy, Resources] | None:
        info = nodes.get(name)
        if info is None:
            return None
        judged_by = policy
        if policy.node_pools:  # the node's pool's limits (app/policy/pools.py)
            judged_by = policy.node_pools.match(info.labels).judged_by
        return measure(info.annotations, judged_by, now_s), judged_by, info.allocatable

    return measured
