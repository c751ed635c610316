"""Synthetic node-exporter data with known load shapes, and the truth it implies.

A node's CPU-busy and memory-used fractions are piecewise-constant functions of
time (`Shape`).  `write_node_openmetrics` turns them into node-exporter-like
OpenMetrics text that `promtool tsdb create-blocks-from openmetrics` accepts;
`expected_value` computes, from the shapes alone, what each recorded metric of
deploy/prometheus/loadaware-rules.yaml must be at a time t.  The expected values
are the continuous-time definitions (average over the last 5 minutes, maximum of
those averages over the last hour/day), so a test compares Prometheus against
the intended meaning, not against another run of Prometheus.

The discrete rule evaluation (30 s / 1 m steps, 15 s samples) agrees with the
continuous values exactly while no shape breakpoint lies near the edges of a
window; `is_settled` says when that holds.  Keep plateaus at least 10 minutes
long so each maximum is reached by a full 5-minute window.

`write_bench_openmetrics` is the cheap path for benchmarks: the six final gauge
metrics written directly (no rules, no raw series) for many nodes; import it
with `promserver.import_openmetrics` and start a `PrometheusServer` on it.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

MINUTE = 60.0
HOUR = 3600.0
DAY = 86400.0

CPU_METRIC = "node_cpu_seconds_total"
MEM_AVAILABLE = "node_memory_MemAvailable_bytes"
MEM_TOTAL = "node_memory_MemTotal_bytes"
JOB = "node-exporter"

ACTIVE_METRICS = ("cpu_usage_active", "mem_usage_active")
DEFAULT_METRICS = (
    "cpu_usage_avg_5m",
    "cpu_usage_max_avg_1h",
    "cpu_usage_max_avg_1d",
    "mem_usage_avg_5m",
    "mem_usage_max_avg_1h",
    "mem_usage_max_avg_1d",
)
RECORDED_METRICS = ACTIVE_METRICS + DEFAULT_METRICS
# The percentiles of the 5-minute means the shipped rules record too (app/policy/metric_names.py).
PERCENTILE_METRICS = (
    "cpu_usage_p90_avg_1h",
    "cpu_usage_p95_avg_1h",
    "cpu_usage_p90_avg_1d",
    "cpu_usage_p95_avg_1d",
    "mem_usage_p90_avg_1h",
    "mem_usage_p95_avg_1h",
    "mem_usage_p90_avg_1d",
    "mem_usage_p95_avg_1d",
)

AVG_WINDOW = 5 * MINUTE
MAX_WINDOWS = {"max_avg_1h": HOUR, "max_avg_1d": DAY}
# Slack around a breakpoint within which the discrete rules (30 s / 1 m
# evaluation, 15 s samples, group evaluation offsets) may still differ from the
# continuous definition.
SETTLE_MARGIN = 2 * MINUTE


# --------------------------------------------------------------------------- shapes


@dataclass(frozen=True)
class Shape:
    """A piecewise-constant fraction of time: `initial` until the first change.

    `changes` are (time, new value) pairs, sorted by time; the value switches at
    exactly that time (right-continuous).  Values are fractions in [0, 1].
    """

    initial: float
    changes: tuple[tuple[float, float], ...] = ()

    def __post_init__(self) -> None:
        times = [t for t, _ in self.changes]
        if times != sorted(times):
            raise ValueError("shape changes must be sorted by time")
        for v in (self.initial, *(v for _, v in self.changes)):
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"shape value {v} is not a fraction in [0, 1]")

    @property
    def breakpoints(self) -> tuple[float, ...]:
        return tuple(t for t, _ in self.changes)

    def __call__(self, t: float) -> float:
        i = bisect.bisect_right(self.breakpoints, t)
        return self.initial if i == 0 else self.changes[i - 1][1]

    def pieces(self, a: float, b: float) -> Iterator[tuple[float, float, float]]:
        """(start, end, value) of the constant pieces covering [a, b]."""
        cur = a
        for t, _ in self.changes:
            if t <= cur:
                continue
            if t >= b:
                break
            yield cur, t, self(cur)
            cur = t
        if b > cur:
            yield cur, b, self(cur)

    def integral(self, a: float, b: float) -> float:
        return sum((e - s) * v for s, e, v in self.pieces(a, b))

    def mean(self, a: float, b: float) -> float:
        return self.integral(a, b) / (b - a)

    def __str__(self) -> str:
        parts = [f"{100 * self.initial:g}%"]
        parts += [f"{100 * v:g}% from t={t:.0f}" for t, v in self.changes]
        return ", then ".join(parts)


def constant(value: float) -> Shape:
    return Shape(value)


def step(before: float, after: float, at: float) -> Shape:
    """`before` until `at`, then `after`."""
    return Shape(before, ((at, after),))


def window(base: float, peak: float, start: float, end: float) -> Shape:
    """`base`, except `peak` during [start, end) -- e.g. a daily peak."""
    if end <= start:
        raise ValueError("window end must be after its start")
    return Shape(base, ((start, peak), (end, base)))


# --------------------------------------------------------------------------- nodes


@dataclass(frozen=True)
class NodeSpec:
    """A Kubernetes node and the node-exporter series (if any) that describe it.

    `instance` is the exact `instance` label value emitted (`10.0.0.1:9100`, a
    bare IP, or the node name); None means the node has no series at all.
    """

    name: str
    internal_ip: str
    instance: str | None
    cpus: int = 4
    cpu_busy: Shape = field(default_factory=lambda: constant(0.0))
    mem_used: Shape = field(default_factory=lambda: constant(0.0))
    mem_total_bytes: int = 16 * 2**30

    @property
    def has_series(self) -> bool:
        return self.instance is not None

    def shape(self, resource: str) -> Shape:
        if resource == "cpu":
            return self.cpu_busy
        if resource == "mem":
            return self.mem_used
        raise ValueError(f"unknown resource {resource!r}")


def default_nodes(anchor: float) -> tuple[NodeSpec, ...]:
    """The nodes the real-Prometheus fixture serves; times are relative to `anchor`.

    Expected values at any settled time between `anchor` and `anchor + 40 min`
    (percent; cpu then mem, each avg_5m / max_avg_1h / max_avg_1d):

    - node-busy    cpu 70/70/70  mem 50/50/50   instance "10.0.0.1:9100"
    - node-peak    cpu 20/20/90  mem 35/35/80   instance "10.0.0.2" (bare IP)
    - node-memhot  cpu 15/15/15  mem 92/92/92   instance "node-memhot" (name)
    - node-cool    cpu  5/ 5/ 5  mem 10/10/10   instance "10.0.0.4:9100"
    - node-cooling cpu 30/80/80  mem 45/75/75   instance "10.0.0.5:9100"
    - node-nodata  no series at all (exists only in the node list)
    """
    a = anchor
    peak_start, peak_end = a - 12 * HOUR - 30 * MINUTE, a - 11 * HOUR - 30 * MINUTE
    cooled_at = a - 15 * MINUTE
    return (
        NodeSpec(
            "node-busy", "10.0.0.1", "10.0.0.1:9100", cpus=4,
            cpu_busy=step(0.40, 0.70, a - 3 * HOUR), mem_used=constant(0.50),
        ),
        NodeSpec(
            "node-peak", "10.0.0.2", "10.0.0.2", cpus=2,
            cpu_busy=window(0.20, 0.90, peak_start, peak_end),
            mem_used=window(0.35, 0.80, peak_start, peak_end),
        ),
        NodeSpec(
            "node-memhot", "10.0.0.3", "node-memhot", cpus=8,
            cpu_busy=constant(0.15), mem_used=constant(0.92),
        ),
        NodeSpec(
            "node-cool", "10.0.0.4", "10.0.0.4:9100", cpus=4,
            cpu_busy=constant(0.05), mem_used=constant(0.10),
        ),
        NodeSpec(
            "node-cooling", "10.0.0.5", "10.0.0.5:9100", cpus=4,
            cpu_busy=step(0.80, 0.30, cooled_at), mem_used=step(0.75, 0.45, cooled_at),
        ),
        NodeSpec("node-nodata", "10.0.0.6", None, cpus=4),
    )


# What the percentile rules record for `default_nodes` at any settled time between
# `anchor` and `anchor + 40 min` (percent), worked out by hand from their shapes: a
# node's share of 5-minute means at each level decides which level a percentile lands
# on. node-peak's one-hour daily peak is 4.5 % of the day's means (with its ramps), too
# few for p95 (its max_avg_1d reads 90); node-busy's 3 hours at 70 are 12.5 %, enough
# for p90; node-cooling's hour still holds 7 minutes at its old level, enough for p95
# but not for p90 (which lands on the ramp down, so it has no entry here).
DEFAULT_NODE_PERCENTILES: dict[str, dict[str, float]] = {
    "node-busy": dict.fromkeys(PERCENTILE_METRICS[:4], 70.0)
    | dict.fromkeys(PERCENTILE_METRICS[4:], 50.0),
    "node-peak": dict.fromkeys(PERCENTILE_METRICS[:4], 20.0)
    | dict.fromkeys(PERCENTILE_METRICS[4:], 35.0),
    "node-memhot": dict.fromkeys(PERCENTILE_METRICS[:4], 15.0)
    | dict.fromkeys(PERCENTILE_METRICS[4:], 92.0),
    "node-cool": dict.fromkeys(PERCENTILE_METRICS[:4], 5.0)
    | dict.fromkeys(PERCENTILE_METRICS[4:], 10.0),
    "node-cooling": dict.fromkeys(PERCENTILE_METRICS[1:4], 80.0)
    | dict.fromkeys(PERCENTILE_METRICS[5:], 75.0),
}


# --------------------------------------------------------------------------- truth


def _split_metric(metric: str) -> tuple[str, str]:
    resource, _, kind = metric.partition("_usage_")
    if resource not in ("cpu", "mem") or kind not in ("active", "avg_5m", *MAX_WINDOWS):
        raise ValueError(f"unknown metric {metric!r}")
    return resource, kind


def _avg_5m(shape: Shape, t: float) -> float:
    return shape.mean(t - AVG_WINDOW, t)


def _max_avg(shape: Shape, t: float, span: float) -> float:
    # The 5-minute average of a piecewise-constant function is piecewise
    # linear in its end time, with kinks only at breakpoints and breakpoints +
    # 5 min; its maximum over [t - span, t] is therefore at one of those kinks
    # or at an end of the interval.
    lo = t - span
    candidates = {lo, t}
    for b in shape.breakpoints:
        for k in (b, b + AVG_WINDOW):
            if lo < k < t:
                candidates.add(k)
    return max(_avg_5m(shape, s) for s in candidates)


def expected_value(node: NodeSpec, metric: str, t: float) -> float | None:
    """The value (percent, 0-100) `metric` must have for `node` at time t.

    None when the node has no series.  Exact for the continuous definitions;
    the recorded rules match within a rounding error while `is_settled(node, t)`.
    """
    resource, kind = _split_metric(metric)
    if not node.has_series:
        return None
    shape = node.shape(resource)
    if kind == "active":
        value = shape(t)
    elif kind == "avg_5m":
        value = _avg_5m(shape, t)
    else:
        value = _max_avg(shape, t, MAX_WINDOWS[kind])
    return 100.0 * value


def expected_values(nodes: Iterable[NodeSpec], metric: str, t: float) -> dict[str, float]:
    """{instance label: expected percent} for every node that has series."""
    out: dict[str, float] = {}
    for n in nodes:
        v = expected_value(n, metric, t)
        if v is not None and n.instance is not None:
            out[n.instance] = v
    return out


def _critical_ranges(t: float) -> list[tuple[float, float]]:
    """Time ranges in which a breakpoint makes discrete and continuous differ at t."""
    m = SETTLE_MARGIN
    ranges = [(t - AVG_WINDOW - m, t + m)]
    for span in MAX_WINDOWS.values():
        ranges.append((t - span - AVG_WINDOW - m, t - span + m))
    return ranges


def is_settled(node: NodeSpec, t: float) -> bool:
    """True when no breakpoint of the node's shapes sits where it could make the
    rules' discrete evaluation at t differ from `expected_value`."""
    points = (*node.cpu_busy.breakpoints, *node.mem_used.breakpoints)
    return not any(lo <= b <= hi for b in points for lo, hi in _critical_ranges(t))


def settled_until(nodes: Sequence[NodeSpec], start: float, limit: float) -> float:
    """The first time in [start, limit] at which some node is not settled (or limit)."""
    t = start
    while t < limit:
        if not all(is_settled(n, t) for n in nodes):
            return t
        t += 15.0
    return limit


# --------------------------------------------------------------------------- OpenMetrics


def _fmt(v: float) -> str:
    return repr(float(v))


def _labels(**labels: str) -> str:
    body = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return "{" + body + "}"


def _sample_times(start: float, end: float, step: float) -> list[float]:
    first = math.ceil(start / step) * step
    n = math.floor((end - first) / step) + 1
    return [first + i * step for i in range(max(n, 0))]


def _ts(t: float) -> str:
    return str(int(t)) if float(t).is_integer() else _fmt(t)


def _cpu_offsets(cpus: int, busy: float) -> list[float]:
    """Per-CPU deviations from the node's busy fraction that average to zero.

    They keep every CPU within [0, 1], so the node average is exactly `busy`
    and a rule that does not average over CPUs gets a different answer.
    """
    spread = min(0.1, busy, 1.0 - busy)
    offsets = [spread if i % 2 == 0 else -spread for i in range(cpus)]
    if cpus % 2:
        offsets[-1] = 0.0
    return offsets


def write_node_openmetrics(
    out: TextIO,
    nodes: Iterable[NodeSpec],
    start: float,
    end: float,
    step: float = 15.0,
    *,
    job: str = JOB,
) -> int:
    """Write node-exporter-like OpenMetrics for `nodes` over [start, end].

    Samples fall on multiples of `step` (seconds).  CPU counters
    (`node_cpu_seconds_total`, modes idle and user) grow per CPU by exactly the
    idle/busy seconds the shape implies, so irate() over two samples returns
    the mean busy fraction of that interval.  Returns the number of samples.
    """
    nodes = [n for n in nodes if n.has_series]
    times = _sample_times(start, end, step)
    if len(times) < 2:
        raise ValueError("need at least two samples")
    count = 0

    out.write("# HELP node_cpu_seconds Seconds the CPUs spent in each mode.\n")
    out.write("# TYPE node_cpu_seconds counter\n")
    for node in nodes:
        assert node.instance is not None
        # Mean busy fraction per sample interval, shared by all CPUs of the node.
        intervals = list(itertools.pairwise(times))
        means = [node.cpu_busy.mean(a, b) for a, b in intervals]
        offsets = [_cpu_offsets(node.cpus, busy) for busy in means]
        base = 1_000_000.0  # counters start at an arbitrary uptime
        for cpu in range(node.cpus):
            for mode in ("idle", "user"):
                lbl = _labels(cpu=str(cpu), mode=mode, instance=node.instance, job=job)
                value = base
                lines = [f"{CPU_METRIC}{lbl} {_fmt(value)} {_ts(times[0])}\n"]
                for (a, b), busy, offs in zip(intervals, means, offsets, strict=True):
                    cpu_busy = busy + offs[cpu]
                    value += (b - a) * ((1.0 - cpu_busy) if mode == "idle" else cpu_busy)
                    lines.append(f"{CPU_METRIC}{lbl} {_fmt(value)} {_ts(b)}\n")
                out.writelines(lines)
                count += len(lines)

    for metric, help_text in (
        (MEM_AVAILABLE, "Memory information field MemAvailable_bytes."),
        (MEM_TOTAL, "Memory information field MemTotal_bytes."),
    ):
        out.write(f"# HELP {metric} {help_text}\n# TYPE {metric} gauge\n")
        for node in nodes:
            assert node.instance is not None
            lbl = _labels(instance=node.instance, job=job)
            total = float(node.mem_total_bytes)
            lines = []
            for t in times:
                v = total if metric == MEM_TOTAL else round(total * (1.0 - node.mem_used(t)))
                lines.append(f"{metric}{lbl} {_fmt(v)} {_ts(t)}\n")
            out.writelines(lines)
            count += len(lines)
    out.write("# EOF\n")
    return count


# --------------------------------------------------------------------------- benchmark data


@dataclass(frozen=True)
class BenchNode:
    name: str
    internal_ip: str
    instance: str


def bench_nodes(n: int) -> list[BenchNode]:
    """`n` nodes (n <= 65,000) named bench-node-00000.. with IPs 10.<i/250>.<i%250>.10."""
    if not 0 < n <= 65_000:
        raise ValueError("bench node count must be in 1..65000")
    out = []
    for i in range(n):
        ip = f"10.{100 + i // 250}.{i % 250}.10"
        out.append(BenchNode(f"bench-node-{i:05d}", ip, f"{ip}:9100"))
    return out


def bench_value(node_name: str, metric: str) -> float:
    """Deterministic percent (0-100) for a benchmark node's metric, constant in time.

    Spread evenly so thresholds like 65 %/75 % split the nodes in known ways.
    """
    _split_metric(metric)
    digest = hashlib.blake2b(f"{node_name}/{metric}".encode(), digest_size=4).digest()
    return round(int.from_bytes(digest, "big") / 2**32 * 100.0, 3)


def write_bench_openmetrics(
    path: Path,
    nodes: Sequence[BenchNode],
    start: float,
    end: float,
    step: float = 120.0,
    metrics: Sequence[str] = DEFAULT_METRICS,
) -> int:
    """Write the final gauge metrics directly for `nodes` over [start, end].

    Each series is labelled only with `instance` (as the recorded rules are)
    and holds `bench_value(node, metric)` at every multiple of `step`; any
    step below the 5-minute lookback keeps instant queries answered.  Returns
    the number of samples.  Measured on 2 cores for 5,000 nodes over 70 min:
    step 120 s -> 1.05 M samples, 0.5 s to write, 3.4 s to import;
    step 60 s -> 2.1 M samples, 0.9 s to write, 9.7 s to import.
    The blocks of one import do not overlap, so the server never compacts.
    """
    times = [_ts(t) for t in _sample_times(start, end, step)]
    count = 0
    with path.open("w", encoding="utf-8", buffering=1 << 20) as out:
        for metric in metrics:
            out.write(f"# TYPE {metric} gauge\n")
            for node in nodes:
                head = f'{metric}{{instance="{node.instance}"}} '
                head += _fmt(bench_value(node.name, metric)) + " "
                out.write("".join(head + ts + "\n" for ts in times))
                count += len(times)
        out.write("# EOF\n")
    return count
