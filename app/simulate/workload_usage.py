"""What each workload's pods are observed to use, as the annotator publishes it.

Production (README "Burst-aware estimation"): Prometheus scrapes each pod's cAdvisor
series; on its sync the annotator queries every pod's usage at once (the CPU counter
as a 5-minute ``rate``, the memory working set as the last gauge), groups the running
pods by workload and publishes one pod's usage per workload
(``app.load.workload_per_pod_usage``: the 90th percentile by nearest rank), which the
extender's estimate of a just-bound pod of that workload is raised to
(``app.load.estimate_scheduled``).

Here the same, on the simulated clock: every ``scrapeInterval`` each pod slot's CPU
seconds since the last scrape and its memory are taken (a pod's CPU is what it really
got: on a node asked for more than it has, every pod's share is cut alike, as CFS
throttling does); the ``rate`` is the CPU seconds of the last 5 minutes of scrapes
over the seconds the pod ran in them. On the policy's shortest sync period, on the
same grid as the node metrics, the running pods (bound now, scraped at least once) are
grouped by workload and the same percentile is taken per run: slots are sorted by
workload, so each workload's values are one run, and its percentile is the value at
``app.load.nearest_rank_index`` within the run sorted. What is published is in force until
the next publication; no delay beyond the scrape and the window, as in production,
where the extender sees the ConfigMap within a watch event. As in production, a
workload measured on fewer than ``MIN_MEASURED_PODS`` running pods observes nothing
(``app.load.estimate``, "Bounds"); ``pods`` holds how many each was measured on. The
other bounds are not simulated: a simulated pod starts as it is bound (no grace
ends), and the cap on raised pods at once (as many as were measured) did not bind on
crane-style-waves (docs/simulate-results.md).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from app.load import MIN_MEASURED_PODS, nearest_rank_index
from app.objects import Resources
from app.simulate.recording_rules import AVG_WINDOW_S, is_due

BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


class SimulatedWorkloadUsage:
    """Per-pod cAdvisor series and the annotator's per-workload publication."""

    def __init__(
        self,
        workload_of: IntArray,
        workloads: int,
        *,
        scrape_interval_s: float,
        publish_period_s: float,
    ) -> None:
        self._workload_of = workload_of  # sorted ascending (``SlotUsage``)
        self._workloads = workloads
        self.scrape_interval_s = scrape_interval_s
        self.publish_period_s = publish_period_s
        slots = len(workload_of)
        rows = max(1, math.ceil(AVG_WINDOW_S / scrape_interval_s))
        self._busy_s = np.zeros((rows, slots))  # CPU-seconds per scrape interval
        self._ran_s = np.zeros((rows, slots))  # seconds the pod ran in it
        self._row = 0
        self._busy_now_s = np.zeros(slots)
        self._ran_now_s = np.zeros(slots)
        self._memory_now = np.zeros(slots)
        self._scraped_memory = np.full(slots, np.nan)
        self._scrapes = 0
        # What is published: one pod's usage per workload (NaN: nothing observed).
        self.cpu_cores: FloatArray = np.full(workloads, np.nan)
        self.memory_bytes: FloatArray = np.full(workloads, np.nan)
        self.pods: IntArray = np.zeros(workloads, dtype=np.int64)  # running pods measured
        self.version = 0  # bumps on every publication
        # Whether a scrape changed the window's rows or the memory scraped since the last
        # publication, and the (read-only) bound slots it was made for: with neither
        # changed, a publication is the same numbers as the last one.
        self._window_changed = True
        self._published_for: BoolArray | None = None
        # The last step's arguments to ``account`` and what they add: a step with the same
        # read-only arrays (a quiet step in the simulator) adds the same numbers.
        self._accounted: tuple[_Step, FloatArray, FloatArray, FloatArray] | None = None

    def account(
        self, cpu_cores: FloatArray, memory_bytes: FloatArray, bound: BoolArray, seconds: float
    ) -> None:
        """What each slot's pod used during the last ``seconds`` (0 where none is bound).
        A read-only array is taken to stay the same numbers (it may be kept as it is)."""
        step = (cpu_cores, memory_bytes, bound, seconds)
        accounted = self._accounted
        if accounted is None or not _same_step(accounted[0], step):
            busy_s: FloatArray = np.where(bound, cpu_cores, 0.0) * seconds
            ran_s: FloatArray = np.where(bound, seconds, 0.0)
            memory_now: FloatArray = np.where(bound, memory_bytes, np.nan)
            accounted = (step, busy_s, ran_s, memory_now)
            self._accounted = accounted
        self._busy_now_s += accounted[1]
        self._ran_now_s += accounted[2]
        self._memory_now = accounted[3]  # only ever replaced, never changed in place

    def advance(self, t_s: float, bound: BoolArray) -> None:
        """Scrape and publish whatever is due at ``t_s``; ``bound``: slots with a pod now."""
        if is_due(t_s, self.scrape_interval_s):
            self._scrape()
        if is_due(t_s, self.publish_period_s) and self._scrapes > 1:
            self._publish(bound)

    def observed(self, workload: int) -> Resources | None:
        """What one pod of ``workload`` was last published to use; None: nothing."""
        cpu, memory = float(self.cpu_cores[workload]), float(self.memory_bytes[workload])
        if math.isnan(cpu) or self.pods.item(workload) < MIN_MEASURED_PODS:
            return None
        return Resources(cpu, memory)

    def _scrape(self) -> None:
        if self._scrapes > 0:
            row = self._row
            self._window_changed = (
                self._window_changed
                or self._memory_now is not self._scraped_memory
                or self._busy_s[row].tobytes() != self._busy_now_s.tobytes()
                or self._ran_s[row].tobytes() != self._ran_now_s.tobytes()
            )
            self._busy_s[row] = self._busy_now_s
            self._ran_s[row] = self._ran_now_s
            self._row = (self._row + 1) % len(self._busy_s)
            self._scraped_memory = self._memory_now  # made by ``account``, never changed
        # Copied into the window above: the same arrays start the next interval.
        self._busy_now_s.fill(0.0)
        self._ran_now_s.fill(0.0)
        self._scrapes += 1

    def _publish(self, bound: BoolArray) -> None:
        self.version += 1
        if not self._window_changed and bound is self._published_for and not bound.flags.writeable:
            return  # the same scrapes of the same pods: the same percentiles
        self._window_changed = False
        self._published_for = bound
        ran_s = self._ran_s.sum(axis=0)
        running = bound & (ran_s > 0) & ~np.isnan(self._scraped_memory)
        slots = np.flatnonzero(running)
        workloads = self._workload_of[slots]
        cpu = self._busy_s.sum(axis=0)[slots] / ran_s[slots]
        memory = self._scraped_memory[slots]
        self.cpu_cores = _percentile_per_workload(cpu, workloads, self._workloads)
        self.memory_bytes = _percentile_per_workload(memory, workloads, self._workloads)
        self.pods = np.bincount(workloads, minlength=self._workloads).astype(np.int64)


_Step = tuple[FloatArray, FloatArray, BoolArray, float]


def _same_step(before: _Step, now: _Step) -> bool:
    """Whether ``account`` was given the same numbers: the same read-only arrays (which
    cannot have changed since) and the same seconds."""
    for array, earlier in zip(now[:3], before[:3], strict=True):
        if array is not earlier or array.flags.writeable:
            return False
    return now[3] == before[3]


def _percentile_per_workload(values: FloatArray, workloads: IntArray, count: int) -> FloatArray:
    """Per workload, ``app.load.nearest_rank_index`` of its values sorted (NaN: none).

    ``workloads`` is sorted (the slots are), so each workload's values are one run, and
    its value at the rank is selected in the run (``np.partition``), not sorted out of
    every slot's: the same value, as equal floats are the same number but for a zero's
    sign, which a zero is taken again by a stable sort to keep."""
    result = np.full(count, np.nan)
    start = 0
    for workload, n in enumerate(np.bincount(workloads, minlength=count).tolist()):
        if n:
            run = values[start : start + n]
            rank = nearest_rank_index(n)
            value = np.partition(run, rank)[rank]
            if value == 0:
                value = np.sort(run, kind="stable")[rank]
            result[workload] = value
            start += n
    return result
