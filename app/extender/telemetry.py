"""The extender's Prometheus metrics."""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, disable_created_metrics
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from app.extender.reserve import PodEstimate
from app.objects import CPU, MEMORY
from app.runtime import PolicyReloadMetrics

# The *_created series double the output and no loadaware alert or dashboard uses them.
disable_created_metrics()  # type: ignore[no-untyped-call]

# Extender calls are expected to take well under a millisecond; the buckets resolve that.
_LATENCY_BUCKETS_S = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    1.0,
    5.0,
)
# Each bucket's le label, as prometheus_client writes it; the last holds every call.
_BUCKET_LABELS = tuple(
    floatToGoString(bound)  # type: ignore[no-untyped-call]
    for bound in (*_LATENCY_BUCKETS_S, math.inf)
)


class ExtenderMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.requests = RequestCounts()
        registry.register(self.requests)
        self.node_cache_age = Gauge(
            "loadaware_extender_node_cache_age_seconds",
            "Seconds since the node cache last heard from the API server (-1 before the "
            "first list or without a node cache).",
            registry=registry,
        )
        self.nodes_known = Gauge(
            "loadaware_extender_nodes",
            "Nodes in the extender's table.",
            registry=registry,
        )
        self.nodes_overloaded = Gauge(
            "loadaware_extender_nodes_overloaded",
            "Nodes whose fresh usage is over a predicate's limit right now.",
            registry=registry,
        )
        self.verdict_index = Gauge(
            "loadaware_extender_verdict_index_info",
            "Always 1; the label says which index answers filter and prioritize: native, or "
            "python when the C extension was not built (slower per node name).",
            ["implementation"],
            registry=registry,
        )
        self.reservation_counts = ReservationCounts()
        registry.register(self.reservation_counts)
        self.reservations = Gauge(
            "loadaware_extender_reservations",
            "Reservations waiting for their pod's binding.",
            registry=registry,
        )
        self.pods_cached = Gauge(
            "loadaware_extender_pods_cached",
            "Pods in the extender's pod cache (-1 without one).",
            registry=registry,
        )
        self.workload_usage_reads = Counter(
            "loadaware_extender_workload_usage_reads",
            "Reads of the annotator's workload-usage ConfigMap by result: ok, missing, "
            "unreadable, stale (older than --workload-usage-max-age) or error; anything but "
            "ok estimates every pod from its requests and limits alone.",
            ["result"],
            registry=registry,
        )
        self.workloads_observed = Gauge(
            "loadaware_extender_workloads_observed",
            "Workloads whose observed per-pod usage the estimate follows now (-1: off).",
            registry=registry,
        )
        self.policy = PolicyReloadMetrics(registry)

    def workload_usage_read(self, result: str) -> None:
        """One read of the workload-usage ConfigMap, by its result."""
        self.workload_usage_reads.labels(result).inc()


class RequestCounts(Collector):
    """Extender calls by verb and code, their latency, the nodes filter rejected and the
    unknown names, as plain numbers: each call counts them after its answer, on the
    extender's only thread, where a Counter or a Histogram takes a lock per update. The
    series are a Counter's and a Histogram's, read at scrape time."""

    def __init__(self) -> None:
        self.calls: dict[tuple[str, int], int] = {}  # (verb, code) -> calls
        self.latency: dict[str, _Latency] = {}  # by verb
        self.rejected: dict[str, int] = {}  # metric -> nodes rejected
        self.unknown_nodes = 0

    def observe(self, verb: str, code: int, elapsed_s: float) -> None:
        key = (verb, code)
        self.calls[key] = self.calls.get(key, 0) + 1
        latency = self.latency.get(verb)
        if latency is None:
            latency = self.latency[verb] = _Latency()
        latency.counts[bisect_left(_LATENCY_BUCKETS_S, elapsed_s)] += 1  # value <= bound
        latency.total_s += elapsed_s

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(
            "loadaware_extender_requests",
            "Extender calls by verb and HTTP status code.",
            labels=["verb", "code"],
        )
        for (verb, code), calls in self.calls.items():
            requests.add_metric([verb, str(code)], float(calls))
        yield requests
        latency = HistogramMetricFamily(
            "loadaware_extender_request_duration_seconds",
            "Time to answer an extender call, from the full body to the response, by verb.",
            labels=["verb"],
        )
        for verb, observed in self.latency.items():
            cumulative, buckets = 0, []
            for label, count in zip(_BUCKET_LABELS, observed.counts, strict=True):
                cumulative += count
                buckets.append((label, float(cumulative)))
            latency.add_metric([verb], buckets, observed.total_s)
        yield latency
        rejected = CounterMetricFamily(
            "loadaware_extender_nodes_rejected",
            "Nodes filtered out, by the first metric over its limit.",
            labels=["metric"],
        )
        for metric, nodes in self.rejected.items():
            rejected.add_metric([metric], float(nodes))
        yield rejected
        yield CounterMetricFamily(
            "loadaware_extender_unknown_nodes",
            "Nodes named in a prioritize request that the extender does not know (they pass "
            "the filter and score as nodes without data).",
            value=float(self.unknown_nodes),
        )


class _Latency:
    """One verb's calls per latency bucket (the last: above every bound) and their sum."""

    __slots__ = ("counts", "total_s")

    def __init__(self) -> None:
        self.counts = [0] * (len(_LATENCY_BUCKETS_S) + 1)
        self.total_s = 0.0


class ReservationCounts(Collector):
    """The reservation counters, as plain ints: a reserving call counts one after every
    answer, on the extender's only thread, where a Counter would take a lock."""

    def __init__(self) -> None:
        self.made = {"filter": 0, "prioritize": 0}
        self.ended = {"confirmed": 0, "moved": 0, "dropped": 0}
        self.skipped = 0
        # reason -> reservations refused: the pod is bound, finished or another pod
        # ("not-pending"), too many unverified pods at once ("unverified-limit"), or the
        # watch never showed the pod within the grace ("unverified").
        self.refused = {"not-pending": 0, "unverified-limit": 0, "unverified": 0}

    def end(self, result: str) -> None:
        """A reservation ended: "confirmed", "moved" or "dropped" (``Reserve``)."""
        self.ended[result] += 1

    def collect(self) -> Iterator[Metric]:
        made = CounterMetricFamily(
            "loadaware_extender_reservations_made_total",
            "Pod estimates reserved on the node the pod will most likely get, before its "
            "binding reaches the pod watch (by verb: prioritize, or filter when one node "
            "passed).",
            labels=["verb"],
        )
        for verb, count in self.made.items():
            made.add_metric([verb], float(count))
        ended = CounterMetricFamily(
            "loadaware_extender_reservations_ended_total",
            "Reservations ended by result: confirmed (bound where reserved), moved (bound "
            "on another node) or dropped (no binding seen within the reservation TTL).",
            labels=["result"],
        )
        for result, count in self.ended.items():
            ended.add_metric([result], float(count))
        yield made
        yield ended
        yield CounterMetricFamily(
            "loadaware_extender_reservations_skipped_total",
            "Prioritize calls that reserved nothing because no node in them passed.",
            value=float(self.skipped),
        )
        refused = CounterMetricFamily(
            "loadaware_extender_reservations_refused_total",
            "Reservations refused by reason: not-pending (the API server holds the pod bound, "
            "finished or with another UID), unverified-limit (too many pods the pod watch "
            "has not shown yet) or unverified (the watch never showed the pod in time).",
            labels=["reason"],
        )
        for reason, count in self.refused.items():
            refused.add_metric([reason], float(count))
        yield refused


UnsampledEstimates = Callable[[], Mapping[str, Mapping[str, float]]]
"""Node name -> resource -> the unsampled estimate added to its usage, as a fraction."""


PodEstimates = Callable[[], Sequence[PodEstimate]]
"""Every pod that counts on a node's estimate now (``DebugViews.pod_estimates``)."""


class EstimateCollector(Collector):
    """Burst estimates at scrape time: how many nodes carry one, the largest per
    resource, and the largest one pod adds and whose namespace it is (issue 28, attack
    1: the pod names are in ``/debug/estimates``). Computed when Prometheus scrapes,
    never on the request path."""

    def __init__(self, unsampled: UnsampledEstimates, pods: PodEstimates | None = None) -> None:
        self._unsampled = unsampled
        self._pods = pods

    def collect(self) -> Iterator[GaugeMetricFamily]:
        nodes = GaugeMetricFamily(
            "loadaware_extender_nodes_with_estimate",
            "Nodes whose verdict includes estimated usage of pods placed since their last "
            "sample (bound or reserved).",
        )
        largest = GaugeMetricFamily(
            "loadaware_extender_estimated_addition_max_fraction",
            "The largest estimated addition to any node's usage, as a fraction of its "
            "allocatable, by resource.",
            labels=["resource"],
        )
        count = 0
        top: dict[str, float] = {}
        for fractions in self._unsampled().values():
            if any(value > 0 for value in fractions.values()):
                count += 1
            for resource, value in fractions.items():
                if resource in (CPU, MEMORY):  # not a class's share (``production:cpu``)
                    top[resource] = max(top.get(resource, 0.0), value)
        nodes.add_metric([], float(count))
        for resource in sorted(top):
            largest.add_metric([resource], top[resource])
        yield nodes
        yield largest
        if self._pods is not None:
            yield from _pod_metrics(self._pods())


def _pod_metrics(estimates: Sequence[PodEstimate]) -> Iterator[GaugeMetricFamily]:
    largest = GaugeMetricFamily(
        "loadaware_extender_pod_estimate_max_fraction",
        "The largest estimate of one pod counting on a node now, as a fraction of its "
        "node's allocatable (never above 1), by resource, labelled with the pod's "
        "namespace (the pod itself: /debug/estimates).",
        labels=["resource", "namespace"],
    )
    by_kind = GaugeMetricFamily(
        "loadaware_extender_estimated_pods",
        "Pods counting on a node's estimate now, by kind: reserved, scored (reserved, then "
        "bound), bound (seen pending, then bound) or placed (first seen on its node: "
        "estimated from its requests alone).",
        labels=["kind"],
    )
    raised = GaugeMetricFamily(
        "loadaware_extender_pod_estimate_raise_max_fraction",
        "Of one pod's estimate counting on a node now, the largest part its workload's "
        "observed usage adds (the workload-usage raise), as a fraction of its node's "
        "allocatable, by resource, labelled with the pod's namespace. Near 1: one pod "
        "is counted as most of a node on its workload's word (docs/security.md).",
        labels=["resource", "namespace"],
    )
    top: dict[str, tuple[float, str]] = {}
    top_raise: dict[str, tuple[float, str]] = {}
    kinds = {"reserved": 0, "scored": 0, "bound": 0, "placed": 0}
    for estimate in estimates:
        pod = estimate.contribution
        kinds[pod.kind] = kinds.get(pod.kind, 0) + 1
        namespace = pod.pod.partition("/")[0]
        for resource, fraction in estimate.fractions.items():
            if fraction > top.get(resource, (-1.0, ""))[0]:
                top[resource] = (fraction, namespace)
        for resource, fraction in estimate.raise_fractions.items():
            if fraction > top_raise.get(resource, (-1.0, ""))[0]:
                top_raise[resource] = (fraction, namespace)
    for resource in sorted(top):
        fraction, namespace = top[resource]
        largest.add_metric([resource, namespace], fraction)
    for resource in sorted(top_raise):
        fraction, namespace = top_raise[resource]
        raised.add_metric([resource, namespace], fraction)
    for kind, count in kinds.items():
        by_kind.add_metric([kind], float(count))
    yield largest
    yield raised
    yield by_kind
