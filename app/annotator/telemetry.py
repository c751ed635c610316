"""The annotator's own Prometheus metrics (prefix ``loadaware_annotator_``).

Alert on ``loadaware_annotator_newest_sample_age_seconds`` exceeding a metric's sync
period plus 5 minutes: past that, the scheduler treats the metric as missing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from app.kube import PatchOutcome
from app.runtime import PolicyReloadMetrics

_SYNC_BUCKETS_S = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


class _SampleAgeCollector(Collector):
    """Computes ages at scrape time, so that they grow while nothing is written."""

    def __init__(self, newest_s: dict[str, float], clock: Callable[[], float]) -> None:
        self._newest_s = newest_s
        self._clock = clock

    def collect(self) -> Iterable[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "loadaware_annotator_newest_sample_age_seconds",
            "Seconds since the timestamp of the newest value this replica wrote, per metric.",
            labels=["metric"],
        )
        now_s = self._clock()
        for metric, at_s in sorted(self._newest_s.items()):
            family.add_metric([metric], max(0.0, now_s - at_s))
        yield family


class AnnotatorMetrics:
    def __init__(
        self, registry: CollectorRegistry | None = None, clock: Callable[[], float] = time.time
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        registry = self.registry
        self.sync_duration = Histogram(
            "loadaware_annotator_sync_duration_seconds",
            "Time from the start of a sync tick until its queries ran and its patches were "
            "sent, per metric synced in that tick.",
            ["metric"],
            buckets=_SYNC_BUCKETS_S,
            registry=registry,
        )
        self.syncs = Counter(
            "loadaware_annotator_syncs_total",
            "Metric syncs by result (ok: the query answered; error: it did not).",
            ["metric", "result"],
            registry=registry,
        )
        self.nodes_annotated = Gauge(
            "loadaware_annotator_nodes_annotated",
            "Nodes whose annotation for the metric was written by the last successful sync.",
            ["metric"],
            registry=registry,
        )
        self.nodes_without_data = Gauge(
            "loadaware_annotator_nodes_without_data",
            "Nodes for which the last successful sync found no valid series; they keep "
            "their old annotation until it goes stale.",
            ["metric"],
            registry=registry,
        )
        self.unmatched_series = Gauge(
            "loadaware_annotator_unmatched_series",
            "Series in the last answer that belong to no known node (check instance labels).",
            ["metric"],
            registry=registry,
        )
        self.query_errors = Counter(
            "loadaware_annotator_query_errors_total",
            "Prometheus queries that failed, by metric and reason (no_series: answered "
            "with no series at all, as when the metric's recording rule is not installed).",
            ["metric", "reason"],
            registry=registry,
        )
        self.patch_errors = Counter(
            "loadaware_annotator_patch_errors_total",
            "Node patches given up after retries, by what was written and why.",
            ["kind", "reason"],
            registry=registry,
        )
        self.patch_retries = Counter(
            "loadaware_annotator_patch_retries_total",
            "Node patches tried again after a conflict, throttling, 5xx or network error.",
            ["reason"],
            registry=registry,
        )
        self.patches = Counter(
            "loadaware_annotator_patches_total",
            "Node writes by what was written (metrics, hot_value or soft_taint) and outcome.",
            ["kind", "outcome"],
            registry=registry,
        )
        self.invalid_samples = Counter(
            "loadaware_annotator_invalid_samples_dropped_total",
            "Samples not written because they were NaN, infinite or negative.",
            ["metric", "reason"],
            registry=registry,
        )
        self.last_success = Gauge(
            "loadaware_annotator_last_success_timestamp_seconds",
            "Unix time of the last sync whose query succeeded, per metric.",
            ["metric"],
            registry=registry,
        )
        self.bindings_observed = Counter(
            "loadaware_annotator_bindings_observed_total",
            "Pods seen getting a node, counted once per pod UID.",
            registry=registry,
        )
        self.soft_tainted_nodes = Gauge(
            "loadaware_annotator_soft_tainted_nodes",
            "Nodes carrying loadaware's PreferNoSchedule soft taint after the last round "
            "(0 with --soft-taints off once they are removed).",
            registry=registry,
        )
        self.soft_taint_changes = Counter(
            "loadaware_annotator_soft_taint_changes_total",
            "Soft taints put on (added) or taken off (removed) a node; the log says why.",
            ["change"],
            registry=registry,
        )
        self.workload_usage_rounds = Counter(
            "loadaware_annotator_workload_usage_rounds_total",
            "Rounds publishing each workload's observed per-pod usage, by result (ok, "
            "query_error: Prometheus gave no usable answer, write_error: the ConfigMap "
            "write failed; either way the previous document stays and ages).",
            ["result"],
            registry=registry,
        )
        self.pod_estimate_raise_max_fraction = Gauge(
            "loadaware_annotator_pod_estimate_raise_max_fraction",
            "Of one pod's estimate in the last soft-taint round, the largest part its "
            "workload's observed usage adds (the workload-usage raise), as a fraction of "
            "its node's allocatable, by resource, labelled with the pod's namespace. Near "
            "1: one pod is counted as most of a node on its workload's word "
            "(docs/security.md).",
            ["resource", "namespace"],
            registry=registry,
        )
        self.class_usage_rounds = Counter(
            "loadaware_annotator_class_usage_rounds_total",
            "Rounds publishing each node's usage by class of pods, while the policy has "
            "classes, by result (ok, query_error: Prometheus gave no usable answer, so the "
            "nodes' class usages age out and the extender fails open on them).",
            ["result"],
            registry=registry,
        )
        self.workloads_published = Gauge(
            "loadaware_annotator_workloads_published",
            "Workloads in the last workload-usage document written.",
            registry=registry,
        )
        self.policy = PolicyReloadMetrics(registry)
        self.newest_sample_s: dict[str, float] = {}
        registry.register(_SampleAgeCollector(self.newest_sample_s, clock))

    def patch_retried(self, outcome: PatchOutcome) -> None:
        """A node patch is tried again, after ``outcome``."""
        self.patch_retries.labels(outcome.value).inc()

    def binding_observed(self, _node: str) -> None:
        self.bindings_observed.inc()

    def record_raises(self, largest: Mapping[tuple[str, str], float]) -> None:
        """The last round's largest raise per (resource, namespace); a namespace without
        a raise any more leaves the gauge."""
        self.pod_estimate_raise_max_fraction.clear()
        for (resource, namespace), fraction in largest.items():
            self.pod_estimate_raise_max_fraction.labels(resource, namespace).set(fraction)

    def record_sample_written(self, metric: str, timestamp_s: float) -> None:
        previous = self.newest_sample_s.get(metric)
        if previous is None or timestamp_s > previous:
            self.newest_sample_s[metric] = timestamp_s
