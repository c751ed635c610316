"""What the annotator is told, as the flags say: the values ``main`` builds and checks
before the annotator itself is imported (its caches, Prometheus' and the Kubernetes
client, the web server: about a second), so that a bad flag, a port in use or a
missing kubeconfig is told without them."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from app.kube import STATE_NAME, WORKLOAD_USAGE_NAME
from app.load import SoftTaintSettings
from app.policy import Policy
from app.prom import PodUsageQueries, build_query
from app.rebalance import DEFAULT_CPU_QUERY, DEFAULT_MEMORY_QUERY
from app.runtime import LeaseSettings


def unqueryable_message(metric: str) -> str:
    return (
        f"syncPolicy metric {metric!r} is not a Prometheus metric name, so the annotator "
        f"cannot query it; rename it (letters, digits, '_' and ':') or take it out of "
        f"syncPolicy"
    )


def unqueryable_metrics(metrics: Sequence[str]) -> list[str]:
    """The metrics the annotator cannot query: names that are annotation keys only."""
    unqueryable = []
    for metric in metrics:
        try:
            build_query(metric)
        except ValueError:
            unqueryable.append(metric)
    return unqueryable


@dataclass(frozen=True, slots=True)
class QueryShape:
    """How each metric's query is built and its values read."""

    selector: str = ""  # label matchers added to every query, e.g. cluster="prod"
    divisor: float = 100.0  # 100 for crane's percentage rules, 1 for rules giving 0..1

    def __post_init__(self) -> None:
        if not self.divisor > 0 or not math.isfinite(self.divisor):
            raise ValueError(f"--value-divisor must be a positive number, got {self.divisor}")
        build_query("probe", self.selector)  # fails early with the flag's name


@dataclass(frozen=True, slots=True)
class WorkloadUsageTarget:
    """The ConfigMap the workload usage is written to, and the queries that measure it."""

    namespace: str
    name: str = WORKLOAD_USAGE_NAME
    queries: PodUsageQueries = field(
        default_factory=lambda: PodUsageQueries(DEFAULT_CPU_QUERY, DEFAULT_MEMORY_QUERY)
    )


@dataclass(frozen=True, slots=True)
class DeschedulerState:
    """The descheduler's state ConfigMap, read for its recent evictions (soft taints
    hold a drained node: app/annotator/drained.py)."""

    namespace: str
    name: str = STATE_NAME


@dataclass(frozen=True, slots=True)
class AnnotatorConfig:
    policy: Policy
    shape: QueryShape = field(default_factory=QueryShape)
    patch_concurrency: int = 16
    hot_value_interval_s: float = 15.0
    lease: LeaseSettings | None = None  # None: no leader election, always write
    health_host: str = "0.0.0.0"
    health_port: int | None = None  # None: no HTTP server
    first_retry_s: float = 10.0  # first retry of a failed metric sync
    soft_taints: SoftTaintSettings | None = None  # None: off, and taken off every node
    soft_taint_interval_s: float = 15.0
    # Where each workload's observed per-pod usage is published (None: not published).
    workload_usage: WorkloadUsageTarget | None = None
    # Where the descheduler's evictions are read (None: not read, no drained node held).
    descheduler_state: DeschedulerState | None = None

    def __post_init__(self) -> None:
        if not self.policy.spec.sync_policy:
            raise ValueError(
                f"policy {self.policy.source} has no syncPolicy entries: the annotator would "
                "have nothing to write; add syncPolicy (see `loadaware policy check`)"
            )
        unqueryable = unqueryable_metrics([s.name for s in self.policy.spec.sync_policy])
        if unqueryable:
            raise ValueError(f"policy {self.policy.source}: {unqueryable_message(unqueryable[0])}")
        if not self.hot_value_interval_s > 0:
            raise ValueError(
                f"--hot-value-interval must be positive, got {self.hot_value_interval_s}"
            )
        if not self.soft_taint_interval_s > 0:
            raise ValueError(
                f"--soft-taint-interval must be positive, got {self.soft_taint_interval_s}"
            )
