"""The descheduler's own Prometheus metrics (prefix ``loadaware_descheduler_``).

Alert on ``time() - loadaware_descheduler_last_successful_run_timestamp_seconds``
growing past a few intervals, and on ``runs_total{result!="ok"}`` rising.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from app.rebalance import EvictionPlan, NodeKind
from app.runtime import PolicyReloadMetrics

_RUN_BUCKETS_S = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)


class DeschedulerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        registry = self.registry
        self.pods_evicted = Counter(
            "loadaware_descheduler_pods_evicted_total",
            "Eviction calls by result (evicted, blocked_by_pdb, gone, error), source node and "
            "namespace. Dry runs call nothing and count nothing here.",
            ["result", "node", "namespace"],
            registry=registry,
        )
        self.pods_skipped = Counter(
            "loadaware_descheduler_pods_skipped_total",
            "Pods considered and not evicted, by reason (the planner's protections and "
            "limits, and the loop's re-checks just before evicting).",
            ["reason"],
            registry=registry,
        )
        self.nodes = Gauge(
            "loadaware_descheduler_nodes",
            "Nodes per class in the last run (source, debouncing, untainted, destination, "
            "neutral, no-data, excluded).",
            ["class"],
            registry=registry,
        )
        self.runs = Counter(
            "loadaware_descheduler_runs_total",
            "Runs by result: ok, not_leader, caches_not_synced, prometheus_down, bad_query, "
            "no_pod_usage, history_unavailable, state_not_saved, leadership_lost, "
            "api_errors, error (an unexpected exception).",
            ["result"],
            registry=registry,
        )
        self.run_duration = Histogram(
            "loadaware_descheduler_run_duration_seconds",
            "Time from the start of a run until its last eviction call returned.",
            buckets=_RUN_BUCKETS_S,
            registry=registry,
        )
        self.last_success = Gauge(
            "loadaware_descheduler_last_successful_run_timestamp_seconds",
            "Unix time at which the last run finished without an error.",
            registry=registry,
        )
        self.invalid_samples = Counter(
            "loadaware_descheduler_invalid_pod_usage_samples_total",
            "Per-pod usage samples dropped (NaN, infinite, negative, no pod labels).",
            ["kind"],
            registry=registry,
        )
        self.repeated_evictions = Counter(
            "loadaware_descheduler_repeated_evictions_total",
            "Evictions of a pod whose workload already had a pod evicted by an earlier "
            "run within returnCooldown: a workload moved again and again is thrashing.",
            registry=registry,
        )
        self.event_errors = Counter(
            "loadaware_descheduler_event_errors_total",
            "Eviction Events that could not be recorded (the history then misses them).",
            registry=registry,
        )
        self.held_hot_nodes = Gauge(
            "loadaware_descheduler_held_hot_nodes",
            "Sources the last run left hot because pods above their requests stay on them "
            "(protected, opted out, guarded, or no destination) and pods within theirs are "
            "not moved for them: each has a LoadAwareHeldHot Event on its Node.",
            registry=registry,
        )
        self.config_reloads = Counter(
            "loadaware_descheduler_config_reloads_total",
            "Reloads of the configuration file by result (success, error).",
            ["result"],
            registry=registry,
        )
        self.policy = PolicyReloadMetrics(registry)

    def record_plan(self, plan: EvictionPlan) -> None:
        """A run's plan: nodes per class (every class, 0 when none), and the pods it skipped."""
        counts: dict[str, int] = {}
        for node_class in plan.node_classes.values():
            counts[node_class.kind.value] = counts.get(node_class.kind.value, 0) + 1
        for kind in NodeKind:
            self.nodes.labels(kind.value).set(counts.get(kind.value, 0))
        for skipped in plan.skipped:
            self.pods_skipped.labels(skipped.code.value).inc()
        self.held_hot_nodes.set(len(plan.held_hot))
