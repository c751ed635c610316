"""Real per-pod usage from cAdvisor series: one instant query per resource for the cluster.

The kubelet's cAdvisor endpoint exports ``container_cpu_usage_seconds_total`` (a
counter) and ``container_memory_working_set_bytes`` (what the kubelet's eviction
manager and ``kubectl top`` use) per container, and the same names again with
``container=""`` (the pod's cgroup, already a sum) and, on older runtimes,
``container="POD"`` (the pause container). Summing all of them counts a pod twice, so
the default queries (``podUsageQueries`` of the descheduler's configuration,
``app/rebalance/config.py``, the one place they are written) keep only real
containers (``container!="", container!="POD"``) and sum them by namespace and pod,
the CPU counter as a 5-minute ``rate``.

Each answers for every pod in the cluster at once; the cost does not grow with the
number of queries, only with the number of series. The queries are configurable (a
recording rule, a ``cluster`` matcher, another window) as long as each result carries
``namespace`` and ``pod`` labels and values in cores and bytes.

A pod is given a usage only when both resources have a valid sample; any other pod
is left out and the planner falls back to its requests, saying so in the plan.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from app.objects.resources import Resources
from app.prom.client import InstantQuery, InvalidSample, PrometheusQueryError, invalid_sample


@dataclass(frozen=True, slots=True)
class PodUsageQueries:
    """The PromQL for each resource: CPU in cores, memory in bytes, by namespace and pod.

    No defaults here: the configuration holds them (module doc).
    """

    cpu: str
    memory: str

    def __post_init__(self) -> None:
        for name, query in (("cpu", self.cpu), ("memory", self.memory)):
            if not query.strip():
                raise ValueError(f"the pod {name} usage query is empty")


class PodUsageUnavailable(Exception):
    """Prometheus gave no usable answer for a resource; nothing may be evicted on it."""

    def __init__(self, resource: str, error: PrometheusQueryError) -> None:
        super().__init__(f"pod {resource} usage query failed: {error}")
        self.resource = resource
        self.reason = error.reason


@dataclass(frozen=True)
class PodUsage:
    """Usage by pod key ``namespace/name``, and what was left out and why."""

    usage: Mapping[str, Resources]
    dropped: Mapping[str, int] = field(default_factory=dict)  # "<resource>:<why>" -> samples
    partial: int = 0  # pods with a valid sample for one resource only (left out)
    newest_sample_s: float | None = None

    @property
    def dropped_total(self) -> int:
        return sum(self.dropped.values())


def _by_pod(
    samples: list[tuple[Mapping[str, str], float, float]], resource: str, dropped: Counter[str]
) -> tuple[dict[str, float], float | None]:
    values: dict[str, float] = {}
    newest: float | None = None
    for labels, value, timestamp_s in samples:
        namespace, pod = labels.get("namespace", ""), labels.get("pod", "")
        problem: InvalidSample | str | None = invalid_sample(value)
        if problem is None and not (namespace and pod):
            problem = "no_pod_labels"
        if problem is not None:
            dropped[f"{resource}:{problem}"] += 1
            continue
        key = f"{namespace}/{pod}"
        # A query that does not aggregate may return several series per pod: add them up.
        values[key] = values.get(key, 0.0) + value
        newest = timestamp_s if newest is None else max(newest, timestamp_s)
    return values, newest


async def read_pod_usage(
    source: InstantQuery, queries: PodUsageQueries, at_s: float | None = None
) -> PodUsage:
    """Run both queries at once; raise PodUsageUnavailable if either fails."""

    async def run(resource: str, promql: str) -> list[tuple[Mapping[str, str], float, float]]:
        try:
            samples = await source.aquery(promql, at_s)
        except PrometheusQueryError as error:
            raise PodUsageUnavailable(resource, error) from None
        return [(s.labels, s.value, s.timestamp_s) for s in samples]

    cpu_samples, memory_samples = await asyncio.gather(
        run("cpu", queries.cpu), run("memory", queries.memory)
    )
    dropped: Counter[str] = Counter()
    cpu, cpu_newest = _by_pod(cpu_samples, "cpu", dropped)
    memory, memory_newest = _by_pod(memory_samples, "memory", dropped)
    both = cpu.keys() & memory.keys()
    newest = max((t for t in (cpu_newest, memory_newest) if t is not None), default=None)
    return PodUsage(
        usage={key: Resources(cpu[key], memory[key]) for key in both},
        dropped=dict(dropped),
        partial=len(cpu.keys() ^ memory.keys()),
        newest_sample_s=newest,
    )
