"""The simulated annotator's hold on drained nodes (``app.load.drained``) and its guard
ahead of the replacements (``app.load.landing_guard``): the descheduler's eviction
records, as the annotator reads them from its state ConfigMap, and the same
``hold_drained`` and ``guard_landings`` over them."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from app.load import (
    GUARD_WINDOW_S,
    Measurement,
    guard_landings,
    hold_drained,
    largest_left,
    largest_moved,
    other_arrivals,
    recent_evictions,
)
from app.objects import EvictionRecord, Resources
from app.policy import Policy

__all__ = ["BindingFeed", "SimulatedDrainedNodes"]


class _Placed(Protocol):
    """A placement of the simulated cluster (``app.simulate.cluster.Placement``)."""

    @property
    def t_s(self) -> float: ...

    @property
    def slot(self) -> int: ...


@dataclass(frozen=True)
class BindingFeed:
    """The cluster's bindings as the annotator's pod watch sees them: ``placements``
    (appended to as pods are bound), each pod slot's workload key (``slot_workloads``,
    fixed for the run) and the clock's epoch."""

    placements: Sequence[_Placed]
    slot_workloads: Sequence[str | None]
    epoch_s: float


class SimulatedDrainedNodes:
    """The descheduler's evictions within ``DRAINED_WINDOW_S`` (by pod UID), told by
    the simulated descheduler as it makes them (``evicted``)."""

    def __init__(
        self,
        node_names: Sequence[str],
        allocatable: Sequence[Resources],
        policies: Sequence[Policy],
        bindings: BindingFeed | None = None,
    ) -> None:
        self._names = list(node_names)
        self._index = {name: index for index, name in enumerate(node_names)}
        self._allocatable = list(allocatable)
        self._policies = policies
        self.evictions: dict[str, EvictionRecord] = {}
        # The bindings the guard's stand-down reads; none: no stand-down.
        self._bindings = bindings
        self._placements_seen = len(bindings.placements) if bindings else 0
        self._bound: deque[tuple[float, str | None]] = deque()  # within GUARD_WINDOW_S

    def evicted(self, record: EvictionRecord) -> None:
        self.evictions[record.uid] = record

    def hold(
        self,
        warm_at_s: dict[str, float],
        measurement: Callable[[int, int], Measurement],
        versions: npt.NDArray[np.int64],
        now_s: float,
        release_margin: float,
    ) -> dict[str, float]:
        """``hold_drained`` on the rule's memory; ``measurement(node, version)``: the
        node's Measurement now, of its annotations' ``versions[node]``."""
        self.evictions = recent_evictions(self.evictions, (), now_s)
        if not self._allocatable:  # no allocatable: no fractions to judge with
            return warm_at_s
        largest = largest_left(self.evictions.values())
        return hold_drained(
            warm_at_s, largest, self._measured(measurement, versions), now_s, release_margin
        )

    def guard(
        self,
        tainted: npt.NDArray[np.bool_],
        measurement: Callable[[int, int], Measurement],
        versions: npt.NDArray[np.int64],
        now_s: float,
        release_margin: float,
    ) -> list[int]:
        """``guard_landings`` over the nodes not ``tainted``, unless a pod that is not a
        replacement was bound lately (``other_arrivals``): the indices of those guarded."""
        self._read_bindings(now_s)
        if not self.evictions or not self._allocatable:
            return []
        moved = largest_moved(self.evictions.values(), now_s)
        if moved is None or other_arrivals(self._bound, self.evictions.values(), now_s):
            return []
        untainted = [self._names[node] for node in np.flatnonzero(~tainted).tolist()]
        measured = self._measured(measurement, versions)
        guarded = guard_landings(moved, untainted, measured, release_margin, len(tainted))
        return sorted(self._index[name] for name in guarded)

    def _read_bindings(self, now_s: float) -> None:
        feed = self._bindings
        if feed is not None:
            placements = feed.placements
            for placement in placements[self._placements_seen :]:
                bound_at_s = feed.epoch_s + placement.t_s
                self._bound.append((bound_at_s, feed.slot_workloads[placement.slot]))
            self._placements_seen = len(placements)
        while self._bound and self._bound[0][0] < now_s - GUARD_WINDOW_S:
            self._bound.popleft()

    def _measured(
        self, measurement: Callable[[int, int], Measurement], versions: npt.NDArray[np.int64]
    ) -> Callable[[str], tuple[Measurement, Policy, Resources] | None]:
        def measured(name: str) -> tuple[Measurement, Policy, Resources] | None:
            node = self._index[name]
            judged = measurement(node, int(versions[node]))
            return judged, self._policies[node], self._allocatable[node]

        return measured
