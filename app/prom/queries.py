"""The PromQL a component sends: each metric's instant query across all nodes, and the
per-pod usage queries. Checked where the flags and files are read, before Prometheus'
client (requests, prometheus-api-client: a few tenths of a second) is loaded."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["PodUsageQueries", "build_query"]


def build_query(metric: str, selector: str = "") -> str:
    """The instant query for one metric across all nodes, e.g. ``cpu_usage_avg_5m{job="x"}``."""
    if not re.fullmatch(r"[a-zA-Z_:][a-zA-Z0-9_:]*", metric):
        raise ValueError(f"metric name {metric!r} is not a valid Prometheus metric name")
    matchers = selector.strip()
    if matchers.startswith("{") and matchers.endswith("}"):
        matchers = matchers[1:-1].strip()
    if "{" in matchers or "}" in matchers:
        raise ValueError(
            f"--query-selector {selector!r} must be label matchers only, "
            'e.g. \'cluster="prod",job="node-exporter"\''
        )
    return f"{metric}{{{matchers}}}" if matchers else metric


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
