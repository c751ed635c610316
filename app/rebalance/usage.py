"""Where a pod's usage comes from: measured by Prometheus, or the extender's estimate
standing in (``app.load.estimate``: ``max(request, limit) x factor``).

Two sources behind one small protocol, tried in order; the plan records which one
answered so that the dry-run table can say a number is an estimate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from app.load import estimate_pod_usage
from app.objects import PodInfo, Resources
from app.policy import EstimationPolicy


class UsageSource(Protocol):
    @property
    def name(self) -> str: ...

    def usage_of(self, pod: PodInfo) -> Resources | None: ...


@dataclass(frozen=True, slots=True)
class MeasuredUsage:
    """Real usage per pod key, from the cluster-wide Prometheus queries."""

    by_pod: Mapping[str, Resources]
    name: str = "prometheus"

    def usage_of(self, pod: PodInfo) -> Resources | None:
        return self.by_pod.get(pod.key)


@dataclass(frozen=True, slots=True)
class EstimatedUsage:
    """For pods Prometheus has no series for (new, or not scraped): the estimate the
    extender applies to a pod just placed, whether or not its estimation is enabled."""

    settings: EstimationPolicy
    name: str = "estimate"

    def usage_of(self, pod: PodInfo) -> Resources | None:
        return estimate_pod_usage(pod.requests, pod.limits, self.settings)


def usage_sources(
    measured: Mapping[str, Resources], settings: EstimationPolicy
) -> tuple[UsageSource, ...]:
    return (MeasuredUsage(measured), EstimatedUsage(settings))


def pod_usage(pod: PodInfo, sources: Sequence[UsageSource]) -> tuple[Resources, str]:
    """The first source's answer and its name."""
    for source in sources:
        usage = source.usage_of(pod)
        if usage is not None:
            return usage, source.name
    return Resources(), "none"
