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

**Only the pod's own node answers for it.** cAdvisor series are the kubelet's word, and
a node's kubelet controls what it exports: it can publish series for pods that run on
other nodes, and a query that sums over every node would add them in (issue 28, attack
4). So each series must name its node, and counts only for a pod that runs there: the
series' ``node`` label, else the host part of its ``instance`` label, must be the pod's
node name or one of that node's addresses (``PodNodes``). A series from any other node
is dropped as ``wrong_node``, one that names no node as ``no_node_label``. The default
queries therefore keep ``node`` in their ``by`` clause; the label must be attached by
Prometheus from service discovery, not taken from the scrape (``honor_labels``), or the
kubelet could write it too (docs/security.md).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from app.objects import NodeInfo, PodInfo, Resources
from app.prom.client import InstantQuery, InvalidSample, PrometheusQueryError, invalid_sample
from app.prom.matching import split_instance
from app.prom.queries import PodUsageQueries as PodUsageQueries

__all__ = ["PodNodes", "PodUsage", "PodUsageUnavailable", "pod_nodes", "read_pod_usage"]

PodNodes = Mapping[str, Collection[str]]
"""Pod key ``namespace/name`` -> the names its node goes by (its name, its addresses)."""


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


def pod_nodes(pods: Iterable[PodInfo], nodes: Mapping[str, NodeInfo]) -> dict[str, tuple[str, ...]]:
    """``PodNodes`` for the pods placed on a node: its name and, if known, its InternalIP."""
    found: dict[str, tuple[str, ...]] = {}
    for pod in pods:
        if pod.node_name is None:
            continue
        node = nodes.get(pod.node_name)
        address = node.internal_ip if node is not None else None
        found[pod.key] = (pod.node_name, address) if address else (pod.node_name,)
    return found


def series_node(labels: Mapping[str, str]) -> str | None:
    """The node a series names: its ``node`` label, else its ``instance`` host."""
    node = labels.get("node")
    if node:
        return node
    instance = labels.get("instance")
    return split_instance(instance)[0] if instance else None


def _by_pod(
    samples: list[tuple[Mapping[str, str], float, float]],
    resource: str,
    nodes: PodNodes,
    dropped: Counter[str],
) -> tuple[dict[str, float], float | None]:
    values: dict[str, float] = {}
    newest: float | None = None
    for labels, value, timestamp_s in samples:
        namespace, pod = labels.get("namespace", ""), labels.get("pod", "")
        key = f"{namespace}/{pod}"
        problem: InvalidSample | str | None = invalid_sample(value)
        if problem is None and not (namespace and pod):
            problem = "no_pod_labels"
        if problem is None:
            node = series_node(labels)
            if node is None:
                problem = "no_node_label"
            elif node not in nodes.get(key, ()):
                problem = "wrong_node"  # another node's kubelet, or a pod not placed (yet)
        if problem is not None:
            dropped[f"{resource}:{problem}"] += 1
            continue
        # A query that does not aggregate may return several series per pod: add them up.
        values[key] = values.get(key, 0.0) + value
        newest = timestamp_s if newest is None else max(newest, timestamp_s)
    return values, newest


async def read_pod_usage(
    source: InstantQuery, queries: PodUsageQueries, nodes: PodNodes, at_s: float | None = None
) -> PodUsage:
    """Run both queries at once, keeping each pod's series from its own node (``nodes``,
    module doc); raise PodUsageUnavailable if either query fails."""

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
    cpu, cpu_newest = _by_pod(cpu_samples, "cpu", nodes, dropped)
    memory, memory_newest = _by_pod(memory_samples, "memory", nodes, dropped)
    both = cpu.keys() & memory.keys()
    newest = max((t for t in (cpu_newest, memory_newest) if t is not None), default=None)
    return PodUsage(
        usage={key: Resources(cpu[key], memory[key]) for key in both},
        dropped=dict(dropped),
        partial=len(cpu.keys() ^ memory.keys()),
        newest_sample_s=newest,
    )
