"""The rise consolidation foresees: how fast the cluster's demand for requests has
grown, so that a drain leaves room for the next such rise (issue 43). Pure.

A node the autoscaler removed comes back only after its scale-up time: the pods of a
step rise (a morning's replicas, a batch) that the nodes left cannot hold wait that
long. So consolidation keeps, beside ``consolidation.minSpare``, unrequested room for
the largest rise in demand it has seen within ``consolidation.riseWithin`` (the node
autoscaler's scan plus provisioning time) over the last ``consolidation.riseLookback``
(a day: the same hour yesterday). Demand is what the pods that need a node ask: the
requests of every pod bound or waiting, not finished, not being deleted, less DaemonSet
and mirror pods (a new node brings its own).

Each run records one sample (``DemandHistory.record``); the descheduler keeps them in
its memory (``app/kube/state.py``), so that a restart, a new leader or a ``--once`` run
goes on with the history. A rise between two consecutive
samples counts whatever their distance (a step arrives between two runs), and a rise
over several samples counts while they lie within ``riseWithin``: a slow ramp, which
the autoscaler keeps up with, asks for little. A history that starts empty (a first
install) keeps only ``minSpare`` until it has seen a rise.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from app.objects import PodInfo, Resources
from app.rebalance.destinations import FINISHED_PHASES

__all__ = [
    "DemandHistory",
    "demand_of",
]


def demand_of(pods: Iterable[PodInfo]) -> Resources:
    """The requests of the pods that need a node (module doc)."""
    cpu = memory = 0.0
    for pod in pods:
        if pod.terminating or pod.is_mirror or pod.phase in FINISHED_PHASES:
            continue
        if pod.owner is not None and pod.owner.kind == "DaemonSet":
            continue
        cpu += pod.requests.cpu_cores
        memory += pod.requests.memory_bytes
    return Resources(cpu, memory)


class DemandHistory:
    """The cluster's demand, one sample a run, over ``lookback_s``."""

    def __init__(self, lookback_s: float, within_s: float) -> None:
        self.lookback_s = lookback_s
        self.within_s = within_s
        self._samples: deque[tuple[float, Resources]] = deque()

    def __len__(self) -> int:
        return len(self._samples)

    @property
    def latest(self) -> Resources | None:
        """The last sample's demand (None before the first)."""
        return self._samples[-1][1] if self._samples else None

    @property
    def samples(self) -> list[tuple[float, Resources]]:
        """The samples, oldest first (what the descheduler's state keeps)."""
        return list(self._samples)

    def merge(self, samples: Iterable[tuple[float, Resources]]) -> None:
        """Take in samples kept elsewhere (the descheduler's state, written by this or
        an earlier process): one per time, in time order, those within the lookback
        of the newest."""
        known = dict(self._samples)
        for at_s, demand in samples:
            known.setdefault(at_s, demand)
        ordered = sorted(known.items(), key=lambda item: item[0])
        newest_s = ordered[-1][0] if ordered else 0.0
        self._samples = deque(s for s in ordered if s[0] >= newest_s - self.lookback_s)

    def record(self, now_s: float, demand: Resources) -> None:
        """One sample; a sample older than the last is ignored (a clock that stepped
        back), and those older than ``lookback_s`` go."""
        if self._samples and now_s < self._samples[-1][0]:
            return
        self._samples.append((now_s, demand))
        while self._samples and self._samples[0][0] < now_s - self.lookback_s:
            self._samples.popleft()

    def rise(self) -> Resources:
        """The largest rise in demand, per resource, over any span of samples within
        ``within_s`` (two consecutive samples always count); zero without a rise."""
        samples = list(self._samples)
        cpu = memory = 0.0
        for i in range(1, len(samples)):
            t_s, demand = samples[i]
            j = i - 1
            while True:
                before = samples[j][1]
                cpu = max(cpu, demand.cpu_cores - before.cpu_cores)
                memory = max(memory, demand.memory_bytes - before.memory_bytes)
                j -= 1
                if j < 0 or t_s - samples[j][0] > self.within_s:
                    break
        return Resources(cpu, memory)
