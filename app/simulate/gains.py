"""Did each eviction buy anything? Judged on the simulated cluster's real demand.

An eviction is meant to cool its source. At the first descheduler round at least
``settleTime`` after a round (``descheduling.PlannerRebalancer`` calls ``step`` each
round, with the demand and binding the last step left), each source the earlier round
evicted from is looked at again: of the pods on it then, those that
were there before the round are taken out (their usage moves with their own
profiles, not with the eviction), and what is left is what came onto the source
since: the replacements kube-scheduler put back on it, or new pods that took the
room. The round's evictions from that source **bought nothing** when what came onto
it uses at least ``NOISE_SHARE`` of what the evicted pods used, on the resource the
evicted pods were the largest share of the node of. That is: the source is not
cooler by at least the evicted usage less noise, with the noise (a pod's usage
jitters from step to step; a pod like the evicted one, landed there by chance) put
at half of it.

A round whose ``settleTime`` reaches past the end of the run is not judged.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

NOISE_SHARE = 0.5

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass
class _Round:
    """One round's evictions from one source, waiting to be judged."""

    node: int
    due_s: float
    # The slots on the node as the round began, less those it evicted: an evicted
    # slot's replacement (the same slot, a new pod) back on the node came onto it.
    stayed: set[int]
    evicted_cpu_cores: float = 0.0
    evicted_memory_bytes: float = 0.0
    count: int = 0


class EvictionGains:
    """Collects evictions as they are made and judges them ``settle_s`` later."""

    def __init__(
        self, settle_s: float, allocatable_cpu: FloatArray, allocatable_memory: FloatArray
    ) -> None:
        self._settle_s = settle_s
        self._allocatable_cpu = allocatable_cpu
        self._allocatable_memory = allocatable_memory
        self._waiting: dict[tuple[int, float], _Round] = {}
        # The last step's demand per slot (cores, bytes): what an evicted pod used.
        self._last_demand: tuple[FloatArray, FloatArray] | None = None
        self.bought_nothing = 0  # evictions
        self.judged = 0

    @property
    def counts(self) -> tuple[int, int]:
        """The evictions judged, and those of them that bought nothing."""
        return self.judged, self.bought_nothing

    def step(self, t_s: float, node_of: IntArray, cpu: FloatArray, memory: FloatArray) -> None:
        """One step's demand per slot: the rounds due by ``t_s`` are judged on it, and
        it is what a pod evicted before the next step used."""
        self.judge(t_s, node_of, cpu, memory)
        self._last_demand = (cpu, memory)

    def evicted(self, slot: int, node: int, t_s: float, node_of: IntArray) -> None:
        """Before ``slot`` leaves ``node`` (``node_of`` as it still stands)."""
        last_demand = self._last_demand
        key = (node, t_s)
        held = self._waiting.get(key)
        if held is None:
            on_node = set(np.flatnonzero(node_of == node).tolist())
            held = self._waiting[key] = _Round(node, t_s + self._settle_s, on_node)
        held.stayed.discard(slot)
        held.count += 1
        if last_demand is not None:
            cpu, memory = last_demand
            held.evicted_cpu_cores += float(cpu[slot])
            held.evicted_memory_bytes += float(memory[slot])

    def judge(self, t_s: float, node_of: IntArray, cpu: FloatArray, memory: FloatArray) -> None:
        """The rounds due by ``t_s``, on this step's demand."""
        if not self._waiting:
            return
        for key in [k for k, r in self._waiting.items() if r.due_s <= t_s]:
            held = self._waiting.pop(key)
            self.judged += held.count
            if _bought_nothing(held, node_of, cpu, memory, self._allocatable(held.node)):
                self.bought_nothing += held.count

    def _allocatable(self, node: int) -> tuple[float, float]:
        return float(self._allocatable_cpu[node]), float(self._allocatable_memory[node])


def _bought_nothing(
    held: _Round,
    node_of: IntArray,
    cpu: FloatArray,
    memory: FloatArray,
    allocatable: tuple[float, float],
) -> bool:
    newcomers = [s for s in np.flatnonzero(node_of == held.node).tolist() if s not in held.stayed]
    came_cpu = float(cpu[newcomers].sum()) if newcomers else 0.0
    came_memory = float(memory[newcomers].sum()) if newcomers else 0.0
    cpu_share = held.evicted_cpu_cores / allocatable[0] if allocatable[0] > 0 else 0.0
    memory_share = held.evicted_memory_bytes / allocatable[1] if allocatable[1] > 0 else 0.0
    if cpu_share >= memory_share:
        evicted, came = held.evicted_cpu_cores, came_cpu
    else:
        evicted, came = held.evicted_memory_bytes, came_memory
    return evicted <= 0 or came >= NOISE_SHARE * evicted
