"""Real usage per pod slot over time, from the workloads' usage profiles.

A slot is one replica position of a workload; the pod in it may be evicted and
recreated, but its usage follows the slot. Each slot has a fixed jitter factor drawn
from the scenario's seed (``1 + jitter x N(0, 1)``, at least 0.1), and spiky slots
spike on steps drawn from ``(seed, step)``, so all policies see the same demand.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from app.simulate.draws import StepUniforms
from app.simulate.scenario import (
    ConstantUsage,
    DiurnalUsage,
    GrowingUsage,
    HistoryUsage,
    PointsUsage,
    Scenario,
    SpikyUsage,
    Usage,
    Workload,
)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
MIN_JITTER = 0.1
# How many steps' usage ``SlotUsage.at`` keeps: more than the descheduler's rate window
# (5 minutes, 10 steps of 30 s), which it reads again every round.
KEPT_STEPS = 16


def base_usage(usage: Usage, t_s: float) -> tuple[float, float]:
    """A workload's per-replica usage (cores, bytes) at ``t_s``, before jitter and spikes."""
    if isinstance(usage, ConstantUsage | SpikyUsage):
        return usage.cpu, usage.memory
    if isinstance(usage, DiurnalUsage):
        phase = math.cos(2 * math.pi * (t_s - usage.peak_at_s) / usage.period_s)
        return (
            usage.cpu * (1 + usage.amplitude * phase),
            usage.memory * (1 + usage.memory_amplitude * phase),
        )
    if isinstance(usage, GrowingUsage):
        span_s = usage.until_s - usage.from_s
        done = 1.0 if span_s <= 0 and t_s >= usage.from_s else 0.0
        if span_s > 0:
            done = min(max((t_s - usage.from_s) / span_s, 0.0), 1.0)
        return (
            usage.start.cpu + (usage.end.cpu - usage.start.cpu) * done,
            usage.start.memory + (usage.end.memory - usage.start.memory) * done,
        )
    if isinstance(usage, HistoryUsage):
        return _recorded(usage, t_s)
    return _interpolate(usage, t_s)


def _recorded(usage: HistoryUsage, t_s: float) -> tuple[float, float]:
    position = max(t_s / usage.interval_s, 0.0)
    last = len(usage.cpu) - 1
    before = min(int(position), last)
    after = min(before + 1, last)
    part = position - before if after > before else 0.0
    return (
        usage.cpu[before] + (usage.cpu[after] - usage.cpu[before]) * part,
        usage.memory[before] + (usage.memory[after] - usage.memory[before]) * part,
    )


def _interpolate(usage: PointsUsage, t_s: float) -> tuple[float, float]:
    times = [point.at_s for point in usage.points]
    cpu = float(np.interp(t_s, times, [point.cpu for point in usage.points]))
    memory = float(np.interp(t_s, times, [point.memory for point in usage.points]))
    return cpu, memory


def creation_times_s(workload: Workload) -> list[float]:
    """When each replica slot of a workload is created: the arrival, then scale-ups
    (or, with a replica history, the first time the count reaches the slot)."""
    if workload.replica_history:
        return _first_wanted_s(workload)
    times = [
        workload.arrival.at_s + i * workload.arrival.over_s / max(workload.replicas, 1)
        for i in range(workload.replicas)
    ]
    for scale in sorted(workload.scale_ups, key=lambda s: s.at_s):
        added = scale.replicas - len(times)
        times += [scale.at_s + i * scale.over_s / added for i in range(max(added, 0))]
    return times


def _first_wanted_s(workload: Workload) -> list[float]:
    times = [
        workload.arrival.at_s + i * workload.arrival.over_s / max(workload.replicas, 1)
        for i in range(workload.replicas)
    ]
    for entry in workload.replica_history:
        times += [entry.at_s] * max(entry.replicas - len(times), 0)
    return times


def replicas_wanted(workload: Workload, t_s: float) -> int:
    """The workload's replica count at ``t_s`` by its replica history."""
    count = workload.replicas
    for entry in workload.replica_history:
        if entry.at_s > t_s:
            break
        count = entry.replicas
    return count


class SlotUsage:
    """Every slot's workload, creation time and usage, for one scenario."""

    def __init__(self, scenario: Scenario) -> None:
        self._scenario = scenario
        workload_of: list[int] = []
        created: list[float] = []
        for index, workload in enumerate(scenario.workloads):
            times = creation_times_s(workload)
            workload_of += [index] * len(times)
            created += times
        self.slots = len(workload_of)
        self.workload_of: IntArray = np.array(workload_of, dtype=np.int64)
        first = np.searchsorted(self.workload_of, np.arange(len(scenario.workloads)))
        # The slot's position within its workload (replica 0, 1, ...).
        self.index_in_workload: IntArray = np.arange(self.slots) - first[self.workload_of]
        self.first_slot: IntArray = first.astype(np.int64)
        # Each workload's slots, one run of them (the slots are sorted by workload).
        ends = [*first.tolist()[1:], self.slots][: len(first)]  # none without workloads
        self.slots_of = [slice(start, end) for start, end in zip(first.tolist(), ends, strict=True)]
        # Workloads whose replica count goes down as well as up: slots end and return.
        self.varying = [i for i, w in enumerate(scenario.workloads) if w.replica_history]
        self.created_at_s: FloatArray = np.array(created, dtype=np.float64)
        self.priority: IntArray = np.array(
            [scenario.workloads[w].priority for w in workload_of], dtype=np.int64
        )
        rng = np.random.default_rng([scenario.seed, 0])
        jitter = np.array([scenario.workloads[w].usage.jitter for w in workload_of])
        self._cpu_factor = np.maximum(1 + jitter * rng.standard_normal(self.slots), MIN_JITTER)
        self._mem_factor = np.maximum(1 + jitter * rng.standard_normal(self.slots), MIN_JITTER)
        for index, workload in enumerate(scenario.workloads):
            if isinstance(workload.usage, HistoryUsage):
                self._measured_spread(index, workload.usage)
        spiky = [
            (index, w.usage)
            for index, w in enumerate(scenario.workloads)
            if isinstance(w.usage, SpikyUsage)
        ]
        self._spiky = [(self.workload_of == index, usage) for index, usage in spiky]
        # Each spiky workload's slots (one run: the slots are sorted by workload).
        self._spiky_slots = [
            slice(int(first[index]), int(first[index]) + int((self.workload_of == index).sum()))
            for index, _ in spiky
        ]
        # No spike is zero: spikes can be added to the spiky slots alone (``_spiked``).
        self._nonzero_spikes = all(
            usage.spike.cpu != 0 and usage.spike.memory != 0 for _, usage in spiky
        )
        self._step_draws = StepUniforms([scenario.seed, 2])
        # The last steps drawn: the descheduler's rate window reads them again.
        self._drawn: dict[tuple[int, float], tuple[FloatArray, FloatArray]] = {}
        # The workloads whose usage depends on time (their base is worked out per step).
        self._changing = [
            index
            for index, w in enumerate(scenario.workloads)
            if not isinstance(w.usage, ConstantUsage | SpikyUsage)
        ]
        bases = [base_usage(w.usage, 0.0) for w in scenario.workloads]
        cpu_bases, memory_bases = [b[0] for b in bases], [b[1] for b in bases]
        self._cpu = _Unspiked(cpu_bases, self._changing, self._cpu_factor, self.workload_of)
        self._memory = _Unspiked(memory_bases, self._changing, self._mem_factor, self.workload_of)
        # With no usage depending on time and none spiking, the one draw of every step.
        self._every_step: tuple[FloatArray, FloatArray] | None = None

    def _measured_spread(self, workload: int, usage: HistoryUsage) -> None:
        start = int(self.first_slot[workload])
        for factors, spread in ((self._cpu_factor, usage.spread.cpu),
                                (self._mem_factor, usage.spread.memory)):  # fmt: skip
            mine = np.flatnonzero(self.workload_of == workload)
            factors[mine] = 1.0
            known = min(len(spread), len(mine))
            factors[start : start + known] = spread[:known]

    def wanted(self, t_s: float) -> npt.NDArray[np.bool_] | None:
        """Which slots their workload wants at ``t_s`` (None: every created slot, as no
        workload has a replica history)."""
        if not self.varying:
            return None
        counts = np.array(
            [
                replicas_wanted(w, t_s) if w.replica_history else self.slots
                for w in self._scenario.workloads
            ],
            dtype=np.int64,
        )
        wanted: npt.NDArray[np.bool_] = self.index_in_workload < counts[self.workload_of]
        return wanted

    def at(self, step: int, t_s: float) -> tuple[FloatArray, FloatArray]:
        """Every slot's usage (cores, bytes) during the step starting at ``t_s``
        (read-only: the last ``KEPT_STEPS`` are kept and handed out again)."""
        if self._every_step is not None:
            return self._every_step
        drawn = self._drawn.get((step, t_s))
        if drawn is None:
            drawn = self._draw(step, t_s)
            for array in drawn:
                array.flags.writeable = False
            self._drawn[step, t_s] = drawn
            if len(self._drawn) > KEPT_STEPS:
                del self._drawn[next(iter(self._drawn))]  # the oldest
            if not self._changing and not self._spiky:
                self._every_step = drawn
        return drawn

    def _draw(self, step: int, t_s: float) -> tuple[FloatArray, FloatArray]:
        workloads = self._scenario.workloads
        changing = [base_usage(workloads[index].usage, t_s) for index in self._changing]
        cpu = self._cpu.drawn([base[0] for base in changing])
        memory = self._memory.drawn([base[1] for base in changing])
        if not self._spiky:
            return cpu, memory
        draws = self._step_draws.random(step, self.slots)  # default_rng([seed, 2, step])
        if self._nonzero_spikes:
            return self._spiked(cpu, draws, 0), self._spiked(memory, draws, 1)
        for mask, usage in self._spiky:
            spiking = mask & (draws < usage.spike_fraction)
            cpu = cpu + np.where(spiking, usage.spike.cpu, 0.0)
            memory = memory + np.where(spiking, usage.spike.memory, 0.0)
        return cpu, memory

    def _spiked(self, usage: FloatArray, draws: FloatArray, resource: int) -> FloatArray:
        """``usage`` plus, on each spiky workload's slots, its spike where the draw says.

        The same numbers as adding, per spiky workload, its spike or 0.0 to every slot
        (the loop above), as no spike is zero: 0.0 added once or more only turns -0.0
        into 0.0, which ``usage + 0.0`` does once here; a spike added to a slot makes
        the same sum after it (a zero plus a non-zero spike is the spike), and no sum
        with a non-zero spike is -0.0 for a later 0.0 to turn."""
        spiked: FloatArray = usage + 0.0
        for (_, profile), slots in zip(self._spiky, self._spiky_slots, strict=True):
            spike = profile.spike.cpu if resource == 0 else profile.spike.memory
            spiking = draws[slots] < profile.spike_fraction
            spiked[slots] += np.where(spiking, spike, 0.0)
        return spiked


class _Unspiked:
    """One resource's usage of every slot before spikes: its workload's base times the
    slot's factor. A step whose bases are the same numbers as the last step's gets the
    same (read-only) array again, so a resource that does not change keeps its array
    while the other one changes (a diurnal profile without memory amplitude)."""

    def __init__(
        self,
        bases: list[float],
        changing: list[int],
        factor: FloatArray,
        workload_of: npt.NDArray[np.int64],
    ) -> None:
        self._bases = bases  # per workload; those of ``changing`` are set per step
        self._changing = changing
        self._factor = factor
        self._workload_of = workload_of
        self._last: tuple[list[float], FloatArray] | None = None

    def drawn(self, changing: list[float]) -> FloatArray:
        """Every slot's usage, given the bases of the workloads that change (in order)."""
        last = self._last
        if last is not None and _same_numbers(last[0], changing):
            return last[1]
        for index, base in zip(self._changing, changing, strict=True):
            self._bases[index] = base
        usage: FloatArray = np.array(self._bases)[self._workload_of] * self._factor
        usage.flags.writeable = False
        self._last = (changing, usage)
        return usage


def _same_numbers(before: list[float], now: list[float]) -> bool:
    """Whether two lists of base usage are the same floats, bit for bit: equal and not
    zero (equal non-zero floats have the same bits; a zero may differ in its sign, which
    a product keeps, and NaN equals nothing)."""
    return before == now and 0.0 not in now
