"""One sync tick: one query per due metric, then one patch per node.

The query for a metric returns every node's series at once; matching them to nodes is
local work. Each node then gets a single merge patch carrying all of the due metrics
it has data for, plus its current hot value. A node without a valid series for a
metric gets no value for it: its old annotation stays and ages out by the freshness
rule, which is safer than writing a made-up 0.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from app.annotator.bindings import BindingWindows, PodWatch
from app.annotator.hotvalue import HotValueWrites
from app.annotator.settings import QueryShape as QueryShape
from app.annotator.settings import unqueryable_message
from app.annotator.telemetry import AnnotatorMetrics
from app.kube import AnnotationPatcher, NodeInfo, PatchOutcome, PatchReport
from app.load import HOT_VALUE_KEY, format_hot_value, format_usage
from app.prom import (
    BAD_QUERY,
    InstantQuery,
    InvalidSample,
    NodeAddress,
    PrometheusQueryError,
    PromSample,
    build_query,
    invalid_sample,
    match_series,
)

log = logging.getLogger(__name__)

# The reason of a sync whose query Prometheus answered with no series at all: nothing
# to write, so the sync failed (retried soon, counted in syncs_total{result="error"},
# /status shows why) rather than succeeded with no node annotated.
NO_SERIES = "no_series"


def no_series_message(metric: str, query: str) -> str:
    return (
        f"Prometheus has no series for {query}: its recording rule is not installed "
        f"(deploy/prometheus/loadaware-rules.yaml records the cpu_ and mem_ metrics), "
        f"records nothing yet (node-exporter not scraped), or --query-selector matches "
        f"none; no node gets a value, and the extender counts {metric} as missing data "
        f"(check with: loadaware policy check FILE --prometheus-url URL)"
    )


def usage_fraction(value: float, divisor: float) -> float | InvalidSample:
    """A query value as a usage fraction in [0, 1], or why it cannot be one.

    Values above the divisor (a 100.3 % from rounding in the rules) are clamped to 1;
    negative ones are dropped rather than clamped, since they mean a broken rule, not
    an idle node.
    """
    problem = invalid_sample(value)
    if problem is not None:
        return problem
    return min(value / divisor, 1.0)


@dataclass
class MetricOutcome:
    """What one metric's part of a tick found."""

    metric: str
    query: str
    error: PrometheusQueryError | None = None
    series: int = 0
    matched: int = 0
    without_data: tuple[str, ...] = ()
    unmatched_series: int = 0
    dropped: Counter[InvalidSample] = field(default_factory=Counter)
    values: dict[str, tuple[float, float]] = field(default_factory=dict)  # node -> (usage, ts)
    annotated: int = 0

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class TickReport:
    metrics: list[MetricOutcome]
    patches: PatchReport
    duration_s: float


PLAIN_SHAPE = QueryShape()  # no selector; crane's values, 0-100


class MetricSync:
    def __init__(
        self,
        source: InstantQuery,
        patcher: AnnotationPatcher,
        *,
        shape: QueryShape = PLAIN_SHAPE,
        telemetry: AnnotatorMetrics | None = None,
        windows: BindingWindows | None = None,
        pod_watch: PodWatch | None = None,
        writes: HotValueWrites | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._source = source
        self._patcher = patcher
        self._shape = shape
        self._telemetry = telemetry if telemetry is not None else AnnotatorMetrics()
        self._windows = windows
        # Hot values are known once the pod watch has listed (None: from the start): a 0
        # before would be a guess, not a fact.
        self._pod_watch = pod_watch
        self._writes = writes
        self._clock = clock

    def _hot_values_known(self) -> bool:
        return self._pod_watch is None or self._pod_watch.synced

    async def run_tick(self, metrics: Sequence[str], nodes: Mapping[str, NodeInfo]) -> TickReport:
        started = time.monotonic()
        addresses = [NodeAddress(info.name, info.internal_ip) for info in nodes.values()]
        outcomes = list(
            await asyncio.gather(*(self._sync_metric(metric, addresses) for metric in metrics))
        )
        patches, hot_values = self._build_patches(outcomes)
        report = await self._patcher.patch_nodes(patches)
        duration_s = time.monotonic() - started
        self._account(outcomes, hot_values, report, duration_s)
        return TickReport(outcomes, report, duration_s)

    async def _sync_metric(self, metric: str, nodes: Sequence[NodeAddress]) -> MetricOutcome:
        try:
            query = build_query(metric, self._shape.selector)
        except ValueError:
            # A reloaded policy may name an annotation key (the start refuses one).
            outcome = MetricOutcome(metric, metric)
            outcome.error = PrometheusQueryError(BAD_QUERY, unqueryable_message(metric))
            return outcome
        outcome = MetricOutcome(metric, query)
        try:
            samples = await self._source.aquery(query)
        except PrometheusQueryError as error:
            outcome.error = error
            return outcome
        if not samples:
            outcome.error = PrometheusQueryError(NO_SERIES, no_series_message(metric, query))
            return outcome
        outcome.series = len(samples)
        valid: list[PromSample] = []
        fractions: dict[int, float] = {}
        for sample in samples:
            fraction = usage_fraction(sample.value, self._shape.divisor)
            if isinstance(fraction, InvalidSample):
                outcome.dropped[fraction] += 1
                continue
            fractions[id(sample)] = fraction
            valid.append(sample)
        match = match_series(valid, nodes)
        outcome.matched = len(match.samples)
        outcome.without_data = match.nodes_without_data
        outcome.unmatched_series = match.unmatched_series
        outcome.values = {
            node: (fractions[id(sample)], sample.timestamp_s)
            for node, sample in match.samples.items()
        }
        return outcome

    def _build_patches(
        self, outcomes: Sequence[MetricOutcome]
    ) -> tuple[dict[str, dict[str, str]], dict[str, int]]:
        patches: dict[str, dict[str, str]] = {}
        for outcome in outcomes:
            for node, (usage, timestamp_s) in outcome.values.items():
                patches.setdefault(node, {})[outcome.metric] = format_usage(usage, timestamp_s)
        hot_values: dict[str, int] = {}
        if self._windows is not None and patches and self._hot_values_known():
            now_s = self._clock()
            current = self._windows.hot_values(now_s)
            for node, annotations in patches.items():
                hot_values[node] = current.get(node, 0)
                annotations[HOT_VALUE_KEY] = format_hot_value(hot_values[node], now_s)
        return patches, hot_values

    def _account(
        self,
        outcomes: Sequence[MetricOutcome],
        hot_values: Mapping[str, int],
        report: PatchReport,
        duration_s: float,
    ) -> None:
        t = self._telemetry
        written = {node for node, o in report.outcomes.items() if o is PatchOutcome.WRITTEN}
        for node_outcome in report.outcomes.values():
            t.patches.labels("metrics", node_outcome.value).inc()
            if node_outcome.is_error:
                t.patch_errors.labels("metrics", node_outcome.value).inc()
        if self._writes is not None:
            now_s = self._clock()
            for node in written:
                if node in hot_values:
                    self._writes.record_written(node, hot_values[node], now_s)
        for outcome in outcomes:
            metric = outcome.metric
            t.sync_duration.labels(metric).observe(duration_s)
            for reason, count in outcome.dropped.items():
                t.invalid_samples.labels(metric, reason.value).inc(count)
            if outcome.error is not None:
                t.syncs.labels(metric, "error").inc()
                t.query_errors.labels(metric, outcome.error.reason).inc()
                log.error("sync %s failed after %.2fs: %s", metric, duration_s, outcome.error)
                continue
            t.syncs.labels(metric, "ok").inc()
            t.last_success.labels(metric).set(self._clock())
            annotated = [node for node in outcome.values if node in written]
            outcome.annotated = len(annotated)
            for node in annotated:
                t.record_sample_written(metric, outcome.values[node][1])
            t.nodes_annotated.labels(metric).set(outcome.annotated)
            t.nodes_without_data.labels(metric).set(len(outcome.without_data))
            t.unmatched_series.labels(metric).set(outcome.unmatched_series)
            self._log_metric(outcome, report, duration_s)

    def _log_metric(self, outcome: MetricOutcome, report: PatchReport, duration_s: float) -> None:
        dropped = sum(outcome.dropped.values())
        if dropped:
            log.warning(
                "sync %s: dropped %d invalid samples (%s); those nodes keep their old value",
                outcome.metric,
                dropped,
                ", ".join(f"{n} {reason}" for reason, n in sorted(outcome.dropped.items())),
            )
        if outcome.without_data:
            shown = ", ".join(outcome.without_data[:5])
            more = len(outcome.without_data) - 5
            log.info(
                "sync %s: no series for %d nodes (%s%s); check their instance labels",
                outcome.metric,
                len(outcome.without_data),
                shown,
                f" and {more} more" if more > 0 else "",
            )
        log.info(
            "sync %s: %d series, %d nodes matched, %d without data, %d unmatched series, "
            "%d annotated; tick patches: %s; %.2fs",
            outcome.metric,
            outcome.series,
            outcome.matched,
            len(outcome.without_data),
            outcome.unmatched_series,
            outcome.annotated,
            report.summary(),
            duration_s,
        )
