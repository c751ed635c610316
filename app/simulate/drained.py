"""The simulated annotator's hold on drained nodes (``app.load.drained``) and its guard
ahead of the replacements (``app.load.landing_guard``): the descheduler's eviction
records, as the annotator reads them from its state ConfigMap, and the same
``hold_drained`` and ``guard_landings`` over them."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from app.load import (
    Measurement,
    guard_landings,
    hold_drained,
    largest_left,
    largest_moved,
    recent_evictions,
)
from app.objects import EvictionRecord, Resources
from app.policy import Policy

__all__ = ["SimulatedDrainedNodes"]


class SimulatedDrainedNodes:
    """The descheduler's evictions within ``DRAINED_WINDOW_S`` (by pod UID), told by
    the simulated descheduler as it makes them (``evicted``)."""

    def __init__(
        self,
        node_names: Sequence[str],
        allocatable: Sequence[Resources],
        policies: Sequence[Policy],
    ) -> None:
        self._names = list(node_names)
        self._index = {name: index for index, name in enumerate(node_names)}
        self._allocatable = list(allocatable)
        self._policies = policies
        self.evictions: dict[str, EvictionRecord] = {}

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
        cap: int,
    ) -> list[int]:
        """``guard_landings`` over the nodes not ``tainted``, within ``cap`` taints in all:
        the indices of those guarded."""
        if not self.evictions or not self._allocatable:
            return []
        moved = largest_moved(self.evictions.values(), now_s)
        if moved is None:
            return []
        untainted = [self._names[node] for node in np.flatnonzero(~tainted).tolist()]
        measured = self._measured(measurement, versions)
        room = cap - int(np.count_nonzero(tainted))
        guarded = guard_landings(moved, untainted, measured, release_margin, room)
        return sorted(self._index[name] for name in guarded)

    def _measured(
        self, measurement: Callable[[int, int], Measurement], versions: npt.NDArray[np.int64]
    ) -> Callable[[str], tuple[Measurement, Policy, Resources] | None]:
        def measured(name: str) -> tuple[Measurement, Policy, Resources] | None:
            node = self._index[name]
            judged = measurement(node, int(versions[node]))
            return judged, self._policies[node], self._allocatable[node]

        return measured
