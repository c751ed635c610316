"""An eviction the descheduler made, as it remembers it."""

from __future__ import annotations

from dataclasses import dataclass

from app.objects.resources import Resources


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
