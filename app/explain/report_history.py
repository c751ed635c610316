"""What ``loadaware report`` reads from Prometheus: when each node was above the
policy's limits, and how often each pod's containers restarted.

**Node-minutes above the limits.** The same series the annotator reads (each
predicate's metric, ``--query-selector``, values divided by ``--value-divisor``),
asked as one range query per limited metric over the period, at a step of a minute
(longer when the period would hold more than ``MAX_POINTS`` points), keeping only the
points above that predicate's ``maxLimitPercent`` (``<metric> > <limit>``), so the
answer holds only hot minutes. Series are matched to nodes as the annotator matches
them (``app/prom/matching.py``); a node is above the limits at a point when any of
its metrics is; ``report_measures`` counts them before and after each move.

**Churn.** kube-state-metrics' ``kube_pod_container_status_restarts_total`` (a
counter per container), increased over the period, summed by pod; ``report_measures``
puts each pod on its node and workload as the API server has it now, so a pod deleted
since counts in the total only. Not scraped (no series), the restarts are unknown, not
0.

Every failure is a note, never an exit: the evictions by outcome come from the
descheduler's state and stand without Prometheus.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from app.explain.report_measures import History, Hot
from app.objects import NodeInfo
from app.policy import Policy
from app.prom import (
    NodeAddress,
    PrometheusQueryError,
    PrometheusSource,
    PromSample,
    build_query,
    match_series,
)

RESTARTS = "kube_pod_container_status_restarts_total"
STEP_S = 60.0
MAX_POINTS = 10_000  # per series; Prometheus refuses more than 11,000
MAX_SAMPLES = 4_000_000  # hot points in one answer, all nodes together


def restarts_query(period_s: float) -> str:
    return f"sum by (namespace, pod) (increase({RESTARTS}[{max(60, int(period_s))}s]))"


def step_for(start_s: float, end_s: float) -> float:
    """A minute, or as many as keep the period within ``MAX_POINTS`` points."""
    return max(STEP_S, 60.0 * math.ceil((end_s - start_s) / MAX_POINTS / 60.0))


def read_hot(
    source: PrometheusSource,
    policy: Policy,
    nodes: Mapping[str, NodeInfo],
    start_s: float,
    end_s: float,
    selector: str,
    divisor: float,
) -> tuple[Hot | None, list[str]]:
    """Each node's points above any of the policy's limits over [start_s, end_s]; None
    when no limited metric has any series at all (a wrong selector, rules not loaded):
    nothing above the limits is then unknown, not 0."""
    step_s = step_for(start_s, end_s)
    # Points at whole multiples of the step, as ``minutes_above`` counts them.
    start_s, end_s = math.floor(start_s / step_s) * step_s, math.floor(end_s / step_s) * step_s
    addresses = [NodeAddress(n.name, n.internal_ip) for n in nodes.values()]
    points: dict[str, set[float]] = {}
    notes = []
    seen = 0
    for metric, limit in policy.limits:
        promql = f"{build_query(metric, selector)} > {limit * divisor:g}"
        answer = source.query_range(
            promql, start_s, end_s, step_s, max_samples=MAX_SAMPLES
        )
        # One sample per series, valued by its hot points, so that the matching's rule
        # for several series on one node (the highest) keeps the hottest.
        if not answer and not _exists(source, build_query(metric, selector), start_s, end_s):
            notes.append(f"{metric}: no series at all (check --query-selector)")
            continue
        seen += 1
        samples = [PromSample(s.labels, float(len(s.times_s)), end_s) for s in answer]
        by_sample = {id(sample): series for sample, series in zip(samples, answer, strict=True)}
        matched = match_series(samples, addresses)
        for node, sample in matched.samples.items():
            points.setdefault(node, set()).update(by_sample[id(sample)].times_s)
        if matched.unmatched_series:
            notes.append(
                f"{metric}: {matched.unmatched_series} hot series matched no node "
                "(check --query-selector)"
            )
    if not seen:
        return None, notes
    return Hot(step_s, {n: frozenset(p) for n, p in points.items()}), notes


def _exists(source: PrometheusSource, series: str, start_s: float, end_s: float) -> bool:
    """Whether ``series`` has any point over the period (one point per series answered)."""
    window_s = max(60, int(end_s - start_s))
    return bool(source.query(f"count(last_over_time({series}[{window_s}s]))", end_s))


def read_restarts(source: PrometheusSource, period_s: float, now_s: float) -> dict[str, float]:
    """Restarts per pod key over the period; empty when kube-state-metrics is absent."""
    found: dict[str, float] = {}
    for sample in source.query(restarts_query(period_s), now_s):
        namespace, pod = sample.labels.get("namespace", ""), sample.labels.get("pod", "")
        if namespace and pod and math.isfinite(sample.value) and sample.value > 0:
            found[f"{namespace}/{pod}"] = found.get(f"{namespace}/{pod}", 0.0) + sample.value
    return found


def read_history(
    source: PrometheusSource,
    policy: Policy,
    nodes: Mapping[str, NodeInfo],
    since_s: float,
    now_s: float,
    window_s: float,
    selector: str = "",
    divisor: float = 100.0,
) -> History:
    """Both readings (module doc); each failure a note."""
    history = History()
    try:
        history.hot, notes = read_hot(
            source, policy, nodes, since_s - window_s, now_s, selector, divisor
        )
        history.notes += notes
    except PrometheusQueryError as error:
        history.notes.append(f"node-minutes above the limits not read: {error}")
    try:
        restarts = read_restarts(source, now_s - since_s, now_s)
    except PrometheusQueryError as error:
        history.notes.append(f"restarts not read: {error}")
    else:
        if restarts or _has_series(source, now_s):
            history.restarts = restarts
        else:
            history.notes.append(
                f"restarts not known: no {RESTARTS} series (is kube-state-metrics scraped?)"
            )
    return history


def _has_series(source: PrometheusSource, now_s: float) -> bool:
    """Whether kube-state-metrics' restart counter exists at all (restarts may be 0)."""
    return bool(source.query(f"count({RESTARTS})", now_s))
