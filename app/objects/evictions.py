"""An eviction the descheduler made, as it remembers it."""

from __future__ import annotations

from dataclasses import dataclass

from app.objects.resources import Resources

__all__ = [
    "EvictionRecord",
    "MoveRecord",
]


@dataclass(frozen=True, slots=True)
class EvictionRecord:
    """An eviction the descheduler made (rebuilt from its own Events after a restart)."""

    pod_key: str
    uid: str
    node: str  # the source it was evicted from
    destination: str | None  # the node the plan reserved room on
    usage: Resources  # the usage moved
    evicted_at_s: float
    workload: str | None  # see ``workload_of``; None for a bare pod


@dataclass(frozen=True, slots=True)
class MoveRecord:
    """What one run evicted from one source, waiting to be judged ``settleTime`` later
    (``outcome`` None), or judged (app/rebalance/aftermath.py). Fractions are of the
    source's allocatable, on ``resource``."""

    source: str
    round_s: float  # when the run that made it started
    resource: str  # "cpu" | "memory"
    source_before: float  # the source's usage fraction as that run measured it
    moved: float  # what the evicted pods used
    others_before: float  # what the source's other pods used then
    destination: str  # the node the plan reserved room on (the first eviction's)
    pods: int
    workloads: tuple[str, ...]  # of the evicted pods (bare pods have none)
    destination_before: float | None = None  # the destination's usage fraction then
    destination_high: float | None = None  # and its targetThreshold
    outcome: str | None = None  # "helped" | "no effect" | "backfired"; None: pending
    judged_at_s: float | None = None
    cooling: float = 0.0  # the source's usage fraction, before - after
    attributed: float = 0.0  # of that, what the move bought
    reason: str = ""

    @property
    def key(self) -> str:
        return f"{self.source}@{self.round_s:.3f}"
