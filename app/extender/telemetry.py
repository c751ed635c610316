"""The extender's Prometheus metrics."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from app.extender.ledger import PodEstimate
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


class ExtenderMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.requests = Counter(
            "loadaware_extender_requests_total",
            "Extender calls by verb and HTTP status code.",
            ["verb", "code"],
            registry=registry,
        )
        self.latency = Histogram(
            "loadaware_extender_request_duration_seconds",
            "Time to answer an extender call, from the full body to the response, by verb.",
            ["verb"],
            buckets=_LATENCY_BUCKETS_S,
            registry=registry,
        )
        self.nodes_rejected = Counter(
            "loadaware_extender_nodes_rejected_total",
            "Nodes filtered out, by the first metric over its limit.",
            ["metric"],
            registry=registry,
        )
        self.unknown_nodes = Counter(
            "loadaware_extender_unknown_nodes_total",
            "Nodes named in a prioritize request that the extender does not know (they pass "
            "the filter and score as nodes without data).",
            registry=registry,
        )
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
        self.policy = PolicyReloadMetrics(registry)


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


EstimatedAdditions = Callable[[], Mapping[str, Mapping[str, float]]]
"""Node name -> resource -> the estimated addition to its usage, as a fraction."""


PodEstimates = Callable[[], Sequence[PodEstimate]]
"""Every pod that counts on a node's estimate now (``Ledger.estimates``)."""


class EstimateCollector(Collector):
    """Burst estimates at scrape time: how many nodes carry one, the largest per
    resource, and the largest one pod adds and whose namespace it is (issue 28, attack
    1: the pod names are in ``/debug/estimates``). Computed when Prometheus scrapes,
    never on the request path."""

    def __init__(self, additions: EstimatedAdditions, pods: PodEstimates | None = None) -> None:
        self._additions = additions
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
        for fractions in self._additions().values():
            if any(value > 0 for value in fractions.values()):
                count += 1
            for resource, value in fractions.items():
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
    top: dict[str, tuple[float, str]] = {}
    kinds = {"reserved": 0, "scored": 0, "bound": 0, "placed": 0}
    for estimate in estimates:
        pod = estimate.contribution
        kinds[pod.kind] = kinds.get(pod.kind, 0) + 1
        namespace = pod.pod.partition("/")[0]
        for resource, fraction in estimate.fractions.items():
            if fraction > top.get(resource, (-1.0, ""))[0]:
                top[resource] = (fraction, namespace)
    for resource in sorted(top):
        fraction, namespace = top[resource]
        largest.add_metric([resource, namespace], fraction)
    for kind, count in kinds.items():
        by_kind.add_metric([kind], float(count))
    yield largest
    yield by_kind
