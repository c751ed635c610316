"""What Prometheus recorded over the range: per-workload usage, per-node usage, replicas.

Per-pod usage comes from the cAdvisor series the descheduler reads
(``app/prom/pod_usage.py``, ``podUsageQueries``' defaults): CPU as a 5-minute rate of
``container_cpu_usage_seconds_total``, memory as ``container_memory_working_set_bytes``,
real containers only (``container!="", container!="POD"``), summed by pod; here also
by ``node``, so that the start of the range says where each pod ran.

**Bounded.** Queries go one namespace at a time (series), each over time chunks of at
most ``RANGE_POINTS_LIMIT`` points (Prometheus refuses more than 11,000 per series)
and at most ``MAX_SAMPLES_PER_ANSWER`` samples per answer. Each answer is folded into
per-workload sums and dropped: what stays is one sum and one count per workload and
point (the scenario's own size), and a running total per pod of the start, never a
series per pod.

**Only a pod's own node answers for it**, as for the annotator: a series counts for a
pod only from the node the API server places it on (its ``node`` label, a node's name
or InternalIP), a pod of the past only from the first node that reported it; others
are dropped and counted (``UsageHistory.wrong_node``).

**Kept per workload**: the mean over its pods at each point; each start pod's usage
over that mean (its ``spread`` factor: the replicas' spread, not only the mean); how
many pods reported at each point (the replica count where kube-state-metrics has none).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol

import numpy as np
import numpy.typing as npt

from app.capture.catalog import Catalog
from app.objects import format_duration
from app.prom import PrometheusQueryError, PromSample, RangeSeries

RANGE_POINTS_LIMIT = 11_000  # Prometheus' own limit per series in a range query
MAX_SAMPLES_PER_ANSWER = 250_000  # bounds the memory one answer takes
# Chunks are sized from the pods the API server has now; pods of the past (a Job's) add
# series. An answer past four times the bound is refused, not held (a hostile or broken
# server: 10 million points took 2.6 GB); Prometheus' own client caps bytes as well.
MAX_SAMPLES_REFUSED = 4 * MAX_SAMPLES_PER_ANSWER
CONTAINERS = 'container!="",container!="POD"'
RATE_WINDOW = "5m"
RATE_WINDOW_S = 300.0

FloatArray = npt.NDArray[np.float64]


class CaptureError(Exception):
    """A missing input; the message is one line that says what to do."""


class PromSource(Protocol):
    def query(self, promql: str, at_s: float | None = None) -> list[PromSample]: ...

    def query_range(
        self,
        promql: str,
        start_s: float,
        end_s: float,
        step_s: float,
        max_samples: int | None = None,
    ) -> list[RangeSeries]: ...


def _quoted(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def pod_usage_query(
    resource: str, namespace: str | None = None, by: str = "namespace, pod, node"
) -> str:
    """The descheduler's default pod query (``app/rebalance/config.py``), narrowed to a
    namespace and grouped ``by``; with neither it is that query exactly."""
    selector = CONTAINERS + (f',namespace="{_quoted(namespace)}"' if namespace else "")
    if resource == "cpu":
        inner = f"rate(container_cpu_usage_seconds_total{{{selector}}}[{RATE_WINDOW}])"
    else:
        inner = f"container_memory_working_set_bytes{{{selector}}}"
    return f"sum by ({by}) ({inner})"


def point_count(start_s: float, end_s: float, step_s: float) -> int:
    """How many points a range query from ``start_s`` to ``end_s`` returns per series."""
    return math.floor((end_s - start_s) / step_s + 1e-9) + 1


def time_chunks(start_s: float, end_s: float, step_s: float, series: int) -> list[tuple[int, int]]:
    """(first, last) point indices of each range query, so that no answer passes
    ``RANGE_POINTS_LIMIT`` points per series or ``MAX_SAMPLES_PER_ANSWER`` in all."""
    points = point_count(start_s, end_s, step_s)
    per = max(1, min(RANGE_POINTS_LIMIT, MAX_SAMPLES_PER_ANSWER // max(series, 1)))
    return [(first, min(first + per, points) - 1) for first in range(0, points, per)]


@dataclass
class QueryStats:
    queries: int = 0
    series: int = 0
    samples: int = 0
    largest_answer: int = 0  # samples
    seconds: float = 0.0
    dropped_points: int = 0  # outside the range asked for, or at no finite time


@dataclass
class Recorder:
    """Runs range queries, counts them, and reports progress."""

    source: PromSource
    start_s: float
    step_s: float
    stats: QueryStats = field(default_factory=QueryStats)
    progress: Callable[[], None] | None = None

    def range(self, promql: str, first: int, last: int) -> list[RangeSeries]:
        """The answer for points ``first``..``last``, with only the points that lie on
        them: a point before or after the chunk, or whose time is no finite number, is
        dropped and counted (issue 42, point 5: it was recorded at the wrong time, or
        ended the capture in a traceback). An answer of more than
        ``MAX_SAMPLES_REFUSED`` points is refused."""
        started = time.perf_counter()
        answer = self.source.query_range(
            promql, self.start_s + first * self.step_s, self.start_s + last * self.step_s,
            self.step_s, max_samples=MAX_SAMPLES_REFUSED,
        )  # fmt: skip
        answer = [self._within(series, first, last) for series in answer]
        self.stats.seconds += time.perf_counter() - started
        samples = sum(len(s.values) for s in answer)
        self.stats.queries += 1
        self.stats.series += len(answer)
        self.stats.samples += samples
        self.stats.largest_answer = max(self.stats.largest_answer, samples)
        if self.progress is not None:
            self.progress()
        return answer

    def index(self, t_s: float) -> int:
        return round((t_s - self.start_s) / self.step_s)

    def _within(self, series: RangeSeries, first: int, last: int) -> RangeSeries:
        times: list[float] = []
        values: list[float] = []
        for t_s, value in zip(series.times_s, series.values, strict=True):
            if math.isfinite(t_s) and first <= self.index(t_s) <= last:
                times.append(t_s)
                values.append(value)
        dropped = len(series.times_s) - len(times)
        if not dropped:
            return series
        self.stats.dropped_points += dropped
        return RangeSeries(series.labels, tuple(times), tuple(values))

    @property
    def start_points(self) -> int:
        """A pod whose first point is within the rate window of the start ran at the start
        (a rate has no value until two scrapes are in its window)."""
        return math.ceil(RATE_WINDOW_S / self.step_s)


@dataclass
class StartPod:
    """A pod that ran at the start: where, and its usage against its workload's mean."""

    workload: int
    node: str
    usage: FloatArray = field(default_factory=lambda: np.zeros(2))  # cpu, memory totals
    mean: FloatArray = field(default_factory=lambda: np.zeros(2))  # the mean at the same points


RESOURCES = ("cpu", "memory")


class UsageHistory:
    """Per workload and point: the sum and count of its pods' usage; per start pod: totals."""

    def __init__(self, catalog: Catalog, points: int) -> None:
        self.catalog = catalog
        self.keys = list(catalog.workloads)
        self.index = {key: i for i, key in enumerate(self.keys)}
        shape = (len(self.keys), points)
        self.sums = [np.zeros(shape, dtype=np.float32) for _ in RESOURCES]
        self.counts = [np.zeros(shape, dtype=np.int32) for _ in RESOURCES]
        self.start_pods: dict[str, StartPod] = {}  # "namespace/pod"
        self.unmatched: set[str] = set()  # pods no workload of the catalog owns
        # The node each pod ran on: the API server's word for the pods it has now, the
        # first node that reported a pod of the past (``_own_node``).
        self.node_of_pod: dict[str, str] = {
            f"{w.namespace}/{pod}": node
            for w in catalog.workloads.values()
            for pod, node in w.pods.items()
            if node
        }
        self.node_by_name = {n.name: n.name for n in catalog.nodes}
        self.node_by_name.update({n.internal_ip: n.name for n in catalog.nodes if n.internal_ip})
        self.wrong_node: set[str] = set()  # pods with series from another node, dropped

    def fold(self, resource: int, answer: Sequence[RangeSeries], recorder: Recorder) -> None:
        rows: list[tuple[int, str, npt.NDArray[np.int64], FloatArray]] = []
        for series in answer:
            namespace = series.labels.get("namespace", "")
            pod = series.labels.get("pod", "")
            key = self.catalog.workload_of_pod(namespace, pod)
            if key is None:
                self.unmatched.add(f"{namespace}/{pod}")
                continue
            node = self._own_node(f"{namespace}/{pod}", series.labels.get("node", ""))
            if node is None:
                continue
            values = np.array(series.values, dtype=np.float64)
            steps = np.array([recorder.index(t) for t in series.times_s], dtype=np.int64)
            usable = np.isfinite(values) & (values >= 0)
            steps, values = steps[usable], values[usable]
            if not len(steps):
                continue
            workload = self.index[key]
            np.add.at(self.sums[resource][workload], steps, values)
            np.add.at(self.counts[resource][workload], steps, 1)
            pod_key = f"{namespace}/{pod}"
            if steps[0] <= recorder.start_points and pod_key not in self.start_pods:
                self.start_pods[pod_key] = StartPod(workload, node)
            if pod_key in self.start_pods:
                rows.append((workload, pod_key, steps, values))
        # The answer holds every pod of the namespace for these points: their means are
        # final now, so each start pod is weighed against them.
        for workload, pod_key, steps, values in rows:
            counts = self.counts[resource][workload][steps].astype(np.float64)
            means = self.sums[resource][workload][steps] / np.maximum(counts, 1)
            record = self.start_pods[pod_key]
            record.usage[resource] += float(values.sum())
            record.mean[resource] += float(means.sum())

    def _own_node(self, pod_key: str, label: str) -> str | None:
        """The node a pod's series counts for, or None to drop it: as the annotator
        reads cAdvisor (``app/prom/pod_usage.py``), a kubelet answers only for pods on
        its own node, named by the series' ``node`` label (a node name or InternalIP).
        A pod the API server has ran where it says; a pod of the past on the first node
        that reported it (issue 42, point 6)."""
        node = self.node_by_name.get(label, label)
        if not node:
            self.wrong_node.add(pod_key)
            return None
        expected = self.node_of_pod.setdefault(pod_key, node)
        if node != expected:
            self.wrong_node.add(pod_key)
            return None
        return node

    def mean(self, workload: int, resource: int) -> FloatArray:
        """The workload's mean per pod at every point; a gap holds the last value."""
        counts = self.counts[resource][workload]
        values = np.where(
            counts > 0, self.sums[resource][workload] / np.maximum(counts, 1), np.nan
        ).astype(np.float64)
        return _fill_gaps(values)

    def reporting(self, workload: int) -> npt.NDArray[np.int64]:
        """How many pods reported (CPU) at each point."""
        counts: npt.NDArray[np.int64] = self.counts[0][workload].astype(np.int64)
        return counts


def _fill_gaps(values: FloatArray) -> FloatArray:
    known = np.flatnonzero(np.isfinite(values))
    if not len(known):
        return np.zeros_like(values)
    positions = np.arange(len(values))
    return np.interp(positions, known, values[known])


def node_count_query() -> str:
    """How many nodes ran pods, at each point: the nodes with a memory series of their
    pods (a node without a pod, not even a DaemonSet's, is not counted). One series,
    whatever the cluster's size; nodes the autoscaler removed since count while they ran."""
    return f"count({pod_usage_query('memory', by='node')})"


class NodeHistory:
    """Each node's pods' usage, summed by the ``node`` label, at every point; and how
    many nodes ran at each point (``count``, NaN where Prometheus had no answer)."""

    def __init__(self, nodes: Sequence[str], points: int) -> None:
        self.index = {name: i for i, name in enumerate(nodes)}
        self.values = [np.full((len(nodes), points), np.nan) for _ in RESOURCES]
        self.count = np.full(points, np.nan)

    def fold_count(self, answer: Sequence[RangeSeries], recorder: Recorder) -> None:
        for series in answer[:1]:  # count() answers with one series
            for t_s, value in zip(series.times_s, series.values, strict=True):
                if math.isfinite(value) and value >= 0:
                    self.count[recorder.index(t_s)] = value

    def counted(self) -> FloatArray | None:
        """The node count at every point, gaps held from the point before; None when
        Prometheus never answered."""
        if not np.isfinite(self.count).any():
            return None
        known = np.flatnonzero(np.isfinite(self.count))
        where = np.searchsorted(known, np.arange(len(self.count)), side="right") - 1
        held: FloatArray = self.count[known[np.maximum(where, 0)]]
        return held

    def fold(self, resource: int, answer: Sequence[RangeSeries], recorder: Recorder) -> None:
        for series in answer:
            row = self.index.get(series.labels.get("node", ""))
            if row is None:
                continue
            for t_s, value in zip(series.times_s, series.values, strict=True):
                if math.isfinite(value) and value >= 0:
                    self.values[resource][row, recorder.index(t_s)] = value

    def recorded(self, node: str) -> tuple[FloatArray, FloatArray] | None:
        row = self.index[node]
        cpu, memory = self.values[0][row], self.values[1][row]
        if not np.isfinite(cpu).any():
            return None
        return _fill_gaps(cpu), _fill_gaps(memory)


REPLICA_METRICS = (  # kube-state-metrics: the spec's replicas over time
    ("kube_deployment_spec_replicas", "deployment"),
    ("kube_statefulset_replicas", "statefulset"),
)


def check_inputs(source: PromSource, start_s: float, end_s: float, where: str) -> None:
    """One clear error for each input the capture cannot do without."""
    cadvisor = f"container_memory_working_set_bytes{{{CONTAINERS}}}"
    if not _count(source, f"count({cadvisor})", end_s):
        raise CaptureError(
            f"no cAdvisor series: Prometheus at {where} has no {cadvisor} at the end of the "
            "range; scrape the kubelets' /metrics/cadvisor endpoint (kube-prometheus does)"
        )
    lowest_ms = _value(source, "min(prometheus_tsdb_lowest_timestamp)", end_s)
    oldest_s = lowest_ms / 1000 if lowest_ms is not None else None
    if oldest_s is None and not _count(source, f"count({cadvisor})", start_s):
        oldest_s = _oldest_point(source, f"count({cadvisor})", start_s, end_s)
    if oldest_s is not None and oldest_s > start_s + 1:
        held_s = max(60.0, (end_s - oldest_s) // 60 * 60)
        raise CaptureError(
            f"--range reaches back to {_iso(start_s)}, but Prometheus at {where} holds data "
            f"only from {_iso(oldest_s)} (its retention); use --range "
            f"{format_duration(held_s)} or less"
        )


def _oldest_point(source: PromSource, promql: str, start_s: float, end_s: float) -> float:
    """The first time ``promql`` has an answer, to a minute (bisection)."""
    low, high = start_s, end_s
    while high - low > 60:
        middle = (low + high) / 2
        if _count(source, promql, middle):
            high = middle
        else:
            low = middle
    return high


def _value(source: PromSource, promql: str, at_s: float) -> float | None:
    try:
        samples = source.query(promql, at_s)
    except PrometheusQueryError as error:
        raise CaptureError(str(error)) from None
    values = [s.value for s in samples if math.isfinite(s.value)]
    return values[0] if values else None


def _count(source: PromSource, promql: str, at_s: float) -> bool:
    value = _value(source, promql, at_s)
    return value is not None and value > 0


def _iso(t_s: float) -> str:
    return datetime.fromtimestamp(t_s, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def record(
    source: PromSource,
    catalog: Catalog,
    start_s: float,
    end_s: float,
    step_s: float,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[UsageHistory, NodeHistory, dict[int, FloatArray], QueryStats]:
    """Every query of a capture, in bounded chunks; the folded results and their cost."""
    points = point_count(start_s, end_s, step_s)
    namespaces = catalog.namespaces
    node_names = [node.name for node in catalog.nodes]
    plan: list[tuple[str, str, list[tuple[int, int]]]] = []  # (kind, namespace, chunks)
    for namespace in namespaces:
        chunks = time_chunks(start_s, end_s, step_s, max(catalog.pods_in(namespace), 1))
        plan.append(("pods", namespace, chunks))
        controllers = sum(1 for w in catalog.workloads.values() if w.namespace == namespace)
        replica_chunks = time_chunks(start_s, end_s, step_s, max(controllers, 1))
        plan.append(("replicas", namespace, replica_chunks))
    plan.append(("nodes", "", time_chunks(start_s, end_s, step_s, max(len(node_names), 1))))
    plan.append(("count", "", time_chunks(start_s, end_s, step_s, 1)))
    sizes = {"replicas": len(REPLICA_METRICS), "count": 1}
    total = sum(len(chunks) * sizes.get(kind, 2) for kind, _, chunks in plan)
    done = [0]

    def tick() -> None:
        done[0] += 1
        if progress is not None:
            progress(done[0], total)

    recorder = Recorder(source, start_s, step_s, progress=tick)
    usage = UsageHistory(catalog, points)
    nodes = NodeHistory(node_names, points)
    replicas: dict[int, FloatArray] = {}
    try:
        for kind, namespace, chunks in plan:
            for first, last in chunks:
                if kind == "pods":
                    for r, resource in enumerate(RESOURCES):
                        query = pod_usage_query(resource, namespace, "namespace, pod, node")
                        usage.fold(r, recorder.range(query, first, last), recorder)
                elif kind == "count":
                    nodes.fold_count(recorder.range(node_count_query(), first, last), recorder)
                elif kind == "nodes":
                    for r, resource in enumerate(RESOURCES):
                        nodes.fold(r, recorder.range(pod_usage_query(resource, by="node"),
                                                     first, last), recorder)  # fmt: skip
                else:
                    _fold_replicas(recorder, catalog, namespace, first, last, usage, replicas)
    except PrometheusQueryError as error:
        raise CaptureError(str(error)) from None
    return usage, nodes, replicas, recorder.stats


def _fold_replicas(
    recorder: Recorder,
    catalog: Catalog,
    namespace: str,
    first: int,
    last: int,
    usage: UsageHistory,
    replicas: dict[int, FloatArray],
) -> None:
    names = catalog.names.get(namespace, {})
    points = usage.sums[0].shape[1]
    for metric, label in REPLICA_METRICS:
        query = f'{metric}{{namespace="{_quoted(namespace)}"}}'
        for series in recorder.range(query, first, last):
            key = names.get(series.labels.get(label, ""))
            if key is None:
                continue
            row = replicas.setdefault(usage.index[key], np.full(points, np.nan))
            for t_s, value in zip(series.times_s, series.values, strict=True):
                if math.isfinite(value) and value >= 0:
                    row[recorder.index(t_s)] = value
