"""How often each pod's containers were throttled or OOM-killed over a window, from
cAdvisor: one instant query per count for the whole cluster.

The kubelet's cAdvisor endpoint exports two counters per container that say a pod
suffered where it ran, beside the usage of ``pod_usage``:

- ``container_cpu_cfs_throttled_periods_total``: CFS periods in which the container
  hit its CPU limit and was throttled (a container with no CPU limit is never
  throttled, and so has no increase);
- ``container_oom_events_total``: OOM kills in the container's cgroup (cAdvisor 0.39
  and later, so kubelets since Kubernetes 1.21). kube-state-metrics' restart reasons
  (``kube_pod_container_status_last_terminated_reason``) are a gauge of the *last*
  reason only, which cannot count kills over a window, so they are not used.

Each is asked as ``increase(...[window])`` summed by namespace, pod and node, at a
given time, so that the same query answers "before" (at the eviction) and "after"
(``settleTime`` later). The same filters as the usage queries apply: real containers
only (``container!="", container!="POD"``), and a series counts only for a pod on the
node it names (``pod_usage``'s rule: a kubelet cannot speak for another node's pods).

Where the counters are not scraped, or a query fails, the count is unknown (None), and
the judgement (``app/rebalance/aftermath.py``) goes on without it: an unknown count
never makes an eviction look worse or better.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from app.prom.client import InstantQuery, PrometheusQueryError, invalid_sample
from app.prom.pod_usage import PodNodes, series_node

__all__ = ["PodHealth", "read_pod_health"]

THROTTLED_PERIODS = "container_cpu_cfs_throttled_periods_total"
OOM_EVENTS = "container_oom_events_total"


def health_query(counter: str, window_s: float) -> str:
    """``counter``'s increase over ``window_s`` (whole seconds), by namespace, pod, node."""
    return (
        f"sum by (namespace, pod, node) (increase({counter}"
        f'{{container!="",container!="POD"}}[{int(window_s)}s]))'
    )


@dataclass(frozen=True, slots=True)
class PodHealth:
    """Per pod key ``namespace/name``: throttled periods and OOM kills over the window.
    A count is None when its query failed; a pod with no series is not in the map."""

    throttled_periods: Mapping[str, float] | None
    oom_kills: Mapping[str, float] | None
    problems: tuple[str, ...] = ()  # why a count is unknown, for the log

    def throttled(self, pods: Iterable[str]) -> int | None:
        """Throttled periods of ``pods`` (keys) in all (``_sum``)."""
        return _sum(self.throttled_periods, pods)

    def oom_killed(self, pods: Iterable[str]) -> int | None:
        """OOM kills of ``pods`` (keys) in all (``_sum``)."""
        return _sum(self.oom_kills, pods)


def _sum(counts: Mapping[str, float] | None, pods: Iterable[str]) -> int | None:
    """The sum over ``pods``, rounded; None when the count is unknown or none of them
    has a series (the counter is not scraped for them)."""
    if counts is None:
        return None
    found = [counts[key] for key in pods if key in counts]
    return round(sum(found)) if found else None


async def read_pod_health(
    source: InstantQuery, window_s: float, at_s: float, nodes: PodNodes
) -> PodHealth:
    """Both counts over ``[at_s - window_s, at_s]``, each pod's from its own node only;
    a failed query leaves its count unknown (never raises for Prometheus' errors). The
    caller picks the window (the descheduler: ``app/descheduler/hindsight.py``)."""

    async def run(counter: str) -> tuple[dict[str, float] | None, str | None]:
        try:
            samples = await source.aquery(health_query(counter, window_s), at_s)
        except PrometheusQueryError as error:
            return None, f"{counter}: {error}"
        counts: dict[str, float] = {}
        for sample in samples:
            namespace, pod = sample.labels.get("namespace", ""), sample.labels.get("pod", "")
            key = f"{namespace}/{pod}"
            if not (namespace and pod) or invalid_sample(sample.value) is not None:
                continue
            if series_node(sample.labels) not in nodes.get(key, ()):
                continue  # another node's kubelet, or a pod this caller did not ask about
            counts[key] = counts.get(key, 0.0) + sample.value
        return counts, None

    (throttled, why_t), (oom, why_o) = await asyncio.gather(run(THROTTLED_PERIODS), run(OOM_EVENTS))
    return PodHealth(throttled, oom, tuple(w for w in (why_t, why_o) if w is not None))
