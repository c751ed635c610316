"""The simulated annotator's hold on drained nodes (``app.load.drained``): the
descheduler's eviction records, as the annotator reads them from its state ConfigMap,
and the same ``hold_drained`` over them."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from app.load import Measurement, hold_drained, largest_left, recent_evictions
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

        def measured(name: str) -> tuple[Measurement, Policy, Resources] | None:
            node = self._index[name]
            judged = measurement(node, int(versions[node]))
            return judged, self._policies[node], self._allocatable[node]

        largest = largest_left(self.evictions.values())
        return hold_drained(warm_at_s, largest, measured, now_s, release_margin)
