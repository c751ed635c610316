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

Each such move is judged by the descheduler's own judgement
(``app/rebalance/aftermath.py``), so that ``simulate`` and the descheduler (its metric,
its Events, ``loadaware report``) speak one language: the pods that stayed are taken
out on both sides (the simulator sees their whole demand, so they explain nothing),
and what came onto the source, the replacements put back on it included, is not told
apart from the move (``arrived`` 0). A move **helped** when what came uses less than
``NOISE_SHARE`` of what the evicted pods used (the move's ``outcome != helped`` is
"bought nothing"), **backfired** when what came uses more than 1.5 times of it (the
source ended hotter than before, by more than noise), else it had **no effect**.

A round whose ``settleTime`` reaches past the end of the run is not judged.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from app.objects import MoveRecord, workload_of
from app.rebalance import (
    NOISE_SHARE,
    EvictionPlan,
    Judgement,
    Measured,
    Outcome,
    Planned,
    PlannedEviction,
    judge,
    judged_move,
)

__all__ = ["NOISE_SHARE", "EvictionGains", "MoveMemory"]

# As the descheduler's state keeps them (app/kube/state.py's MOVES_KEPT_S): a day.
_MOVES_KEPT_S = 86400.0

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


class RunCounts(Protocol):
    """Where a run keeps the counts (``cluster.Run``)."""

    evictions_judged: int
    evictions_bought_nothing: int
    evictions_helped: int
    evictions_no_effect: int
    evictions_backfired: int


@dataclass
class _Round:
    """One round's evictions from one source, waiting to be judged."""

    node: int
    due_s: float
    # The slots on the node as the round began, less those it evicted: an evicted
    # slot's replacement (the same slot, a new pod) back on the node came onto it.
    stayed: set[int]
    evicted_slots: set[int]
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
        self.outcomes = dict.fromkeys(Outcome, 0)  # evictions judged, by outcome
        # Each round's move from a source, once judged: (node, round's t_s, judgement,
        # evictions), for the descheduler's back-off (``descheduling``) to read.
        self.judged_moves: list[tuple[int, float, Judgement, int]] = []

    @property
    def judged(self) -> int:
        return sum(self.outcomes.values())

    @property
    def bought_nothing(self) -> int:
        """The evictions judged not to have helped (no effect, or backfired)."""
        return self.judged - self.outcomes[Outcome.HELPED]

    def count_into(self, run: RunCounts) -> None:
        """The counts so far into a run's."""
        run.evictions_judged, run.evictions_bought_nothing = self.counts
        run.evictions_helped = self.outcomes[Outcome.HELPED]
        run.evictions_no_effect = self.outcomes[Outcome.NO_EFFECT]
        run.evictions_backfired = self.outcomes[Outcome.BACKFIRED]

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
            held = self._waiting[key] = _Round(node, t_s + self._settle_s, on_node, set())
        held.stayed.discard(slot)
        held.evicted_slots.add(slot)
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
            judgement = _judge(held, node_of, cpu, memory, self._allocatable(held.node))
            self.outcomes[judgement.outcome] += held.count
            self.judged_moves.append((held.node, key[1], judgement, held.count))

    def _allocatable(self, node: int) -> tuple[float, float]:
        return float(self._allocatable_cpu[node]), float(self._allocatable_memory[node])


def _judge(
    held: _Round,
    node_of: IntArray,
    cpu: FloatArray,
    memory: FloatArray,
    allocatable: tuple[float, float],
) -> Judgement:
    on_node = np.flatnonzero(node_of == held.node).tolist()
    newcomers = [s for s in on_node if s not in held.stayed]
    came_cpu = float(cpu[newcomers].sum()) if newcomers else 0.0
    came_memory = float(memory[newcomers].sum()) if newcomers else 0.0
    cpu_share = held.evicted_cpu_cores / allocatable[0] if allocatable[0] > 0 else 0.0
    memory_share = held.evicted_memory_bytes / allocatable[1] if allocatable[1] > 0 else 0.0
    if cpu_share >= memory_share:
        resource, moved, came = "cpu", cpu_share, came_cpu / max(allocatable[0], 1e-12)
    else:
        resource, moved, came = "memory", memory_share, came_memory / max(allocatable[1], 1e-12)
    # The pods that stayed are out of both sides: only what left and what came counts.
    planned = Planned(str(held.node), resource, moved, moved, "", held.count, 0.0)
    returned = sum(1 for s in on_node if s in held.evicted_slots)
    return judge(planned, Measured(came, stayed_after=0.0, returned=returned))


class MoveMemory:
    """Each round's move per source, as the descheduler's state keeps them: made (by
    node index and round), then judged by ``EvictionGains``; the judged ones are what
    the planner's back-off reads (``ClusterView.moves``)."""

    def __init__(self) -> None:
        self._made: dict[tuple[int, float], MoveRecord] = {}
        self.judged: list[MoveRecord] = []

    def made(
        self, node: int, t_s: float, now_s: float, eviction: PlannedEviction, the_plan: EvictionPlan
    ) -> None:
        """An eviction into its round's move from its source."""
        held = self._made.get((node, t_s))
        workload = workload_of(eviction.pod)
        if held is None:
            usage = the_plan.node_classes[eviction.source].usage_fraction
            resource = max(usage, key=lambda r: usage[r]) if usage else "cpu"
            held = MoveRecord(
                eviction.source, now_s, resource, usage.get(resource, 0.0), 0.0, 0.0,
                eviction.destination, 0, (),
            )  # fmt: skip
        workloads = held.workloads
        if workload is not None and workload not in workloads and len(workloads) < 8:
            workloads = (*workloads, workload)
        self._made[(node, t_s)] = dataclasses.replace(
            held, pods=held.pods + 1, workloads=workloads
        )

    def collect(self, gains: EvictionGains, now_s: float) -> None:
        """The moves ``gains`` judged since the last call, judged at ``now_s``."""
        for node, round_t_s, judgement, _count in gains.judged_moves:
            made = self._made.pop((node, round_t_s), None)
            if made is not None:
                self.judged.append(judged_move(made, judgement, now_s))
        gains.judged_moves.clear()
        self.judged = [m for m in self.judged if m.round_s >= now_s - _MOVES_KEPT_S]
