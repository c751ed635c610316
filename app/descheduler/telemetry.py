"""The descheduler's own Prometheus metrics (prefix ``loadaware_descheduler_``).

Alert on ``time() - loadaware_descheduler_last_successful_run_timestamp_seconds``
growing past a few intervals, and on ``runs_total{result!="ok"}`` rising.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from app.objects import MoveRecord
from app.rebalance import EvictionPlan, NodeKind, Outcome
from app.runtime import PolicyReloadMetrics

# The source's cooling a move bought, per evicted pod (usage fraction of the source):
# below 0 it is hotter than other pods explain.
_COOLING_BUCKETS = (-0.2, -0.1, -0.05, 0.0, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5)
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
        self.eviction_outcomes = Counter(
            "loadaware_descheduler_eviction_outcomes_total",
            "Evictions judged settleTime after their run, by outcome (helped, no_effect, "
            "backfired): whether their source cooled by what they moved, less what other "
            "pods explain (docs/troubleshooting.md, is the descheduler helping?).",
            ["outcome"],
            registry=registry,
        )
        self.source_cooling = Histogram(
            "loadaware_descheduler_source_cooling_fraction",
            "Per judged eviction: how much cooler its source was settleTime later, less what "
            "other pods explain, as a usage fraction of the source, shared among the pods "
            "evicted from it in one run (below 0: hotter).",
            buckets=_COOLING_BUCKETS,
            registry=registry,
        )
        self.drains = Counter(
            "loadaware_descheduler_consolidation_drains_total",
            "Consolidation's drains by event: started (the drain taint put on a node), "
            "abandoned (the taint taken off: the drain no longer holds, or the autoscaler "
            "did not remove the node within abandonAfter), taint_error (the taint could not "
            "be written: the drain waits for the next run).",
            ["event"],
            registry=registry,
        )
        self.draining_nodes = Gauge(
            "loadaware_descheduler_draining_nodes",
            "Nodes carrying loadaware's drain taint (loadaware.io/draining) at the last "
            "run's start, before it started or gave up any drain.",
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

    def record_judged(self, moves: list[MoveRecord]) -> None:
        """Judged moves: each evicted pod counted under its move's outcome, and the
        cooling its move bought, shared among the pods of the move."""
        for outcome in Outcome:  # every label present from the start, at 0
            self.eviction_outcomes.labels(outcome_label(outcome.value))
        for move in moves:
            if move.outcome is None or move.pods <= 0:
                continue
            self.eviction_outcomes.labels(outcome_label(move.outcome)).inc(move.pods)
            for _ in range(move.pods):
                self.source_cooling.observe(move.attributed / move.pods)


def outcome_label(outcome: str) -> str:
    """An outcome as a label value: "no effect" is ``no_effect``."""
    return outcome.replace(" ", "_")
