"""The lagging metrics pipeline: scrapes, crane's recording rules, the annotator's syncs.

What the load model reads is made the way production makes it:

* every ``scrapeInterval`` Prometheus scrapes each node: a CPU-seconds counter (so the
  rate between two scrapes is the mean CPU use in between) and a memory gauge;
* every ``ruleInterval`` the recording rules run in one group, in order:
  ``*_usage_active`` (the rate over the last two scrapes, the last memory gauge),
  ``*_usage_avg_5m`` (mean of ``*_usage_active`` over 5 minutes) and
  ``*_usage_max_avg_1h`` / ``_1d`` (max of ``*_usage_avg_5m`` over the window) and
  ``*_usage_p90_avg_1h`` ... ``_p95_avg_1d`` (that percentile of them over the window,
  interpolated between ranks as Prometheus' ``quantile_over_time``); any window and
  percentile the policy's grammar takes (``app/policy/metric_names.py``), not just the
  shipped ones;
* on each metric's sync period (from the policy, on one grid from the start) the
  annotator queries the latest rule value and writes it with ``format_usage``, stamped
  with the query time, as Prometheus stamps an instant query's result; a node without
  a value keeps its old annotation, as the annotator does;
* every ``hotValueInterval`` the hot value of each node with recent bindings is
  computed by ``hot_value_from_bindings`` and written with ``format_hot_value``.

Values are kept as numbers and turned into annotation strings only when the load
model reads a node (``annotations``): the strings are a pure function of the value and
the write time, so this is the same text, made only when it is needed, and kept until
one of the node's annotations is rewritten (``node_version`` counts the rewrites).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from app.load import HOT_VALUE_KEY, format_hot_value, format_usage, hot_value_from_bindings
from app.policy import AVG_WINDOW_S as AVG_WINDOW_S
from app.policy import Policy, usage_metric

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

_DAY_S = 86400.0


@dataclass(frozen=True, slots=True)
class Rule:
    resource: str  # "cpu" or "mem"
    window_s: float | None  # None: the 5m average itself
    quantile: float | None = None  # None: the maximum over the window (or the average)
    step_s: float | None = None  # a percentile's means this far apart (None: every one)


def rule_of(metric: str) -> Rule | None:
    """The recording rule behind a usage metric's name (crane's, or a percentile of the
    5-minute means), or None if it has none."""
    meaning = usage_metric(metric)
    if meaning is None:
        return None
    return Rule(meaning.resource, meaning.window_s, meaning.quantile, meaning.step_s)


class _History:
    """The last ``length`` rule evaluations of one series per node (a ring buffer)."""

    def __init__(self, length: int, nodes: int, *, counts_repeats: bool = False) -> None:
        # Left unfilled: a row is read only once written (``newest``, ``last``). A day's
        # history of 1,000 nodes is 11 MB, which an hour's run would fill for nothing.
        self.values = np.empty((length, nodes))
        self.written = 0
        # Row positions newest first, twice round: ``last`` takes a slice of it.
        self._backwards = np.tile(np.arange(length - 1, -1, -1), 2)
        self._counts_repeats = counts_repeats
        self._newest: tuple[FloatArray, bytes] | None = None  # the row pushed last
        self.same_in_a_row = 0  # how many of the newest rows are the same bytes (if counted)

    def push(self, row: FloatArray) -> None:
        if self._counts_repeats:
            newest = self._newest
            if newest is not None and row is newest[0] and not row.flags.writeable:
                self.same_in_a_row += 1  # the same read-only array: the same bytes
            else:
                row_bytes = row.tobytes()
                same = newest is not None and row_bytes == newest[1]
                self.same_in_a_row = self.same_in_a_row + 1 if same else 1
                self._newest = (row, row_bytes)
        self.values[self.written % len(self.values)] = row
        self.written += 1

    def newest(self) -> FloatArray:
        newest: FloatArray = self.values[(self.written - 1) % len(self.values)]
        return newest

    def last(self, count: int) -> FloatArray:
        """The newest ``count`` rows (fewer if fewer were written), newest first."""
        length = len(self.values)
        count = min(count, self.written, length)
        start = length - 1 - (self.written - 1) % length
        return self.values[self._backwards[start : start + count]]


def _mean_ignoring_nan(rows: FloatArray) -> FloatArray:
    sums = rows.sum(axis=0)
    if not math.isnan(sums.sum()):
        # No NaN in any row (one would make its column's sum NaN): each column counts
        # every row, and the masks below would change nothing.
        mean: FloatArray = sums / len(rows)
        return mean
    missing = np.isnan(rows)
    # The method, not np.sum: the same reduction, without the wrapper's cost per step.
    counts = (~missing).sum(axis=0)
    sums = np.where(missing, 0.0, rows).sum(axis=0)  # np.nansum, without its copies
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def _max_ignoring_nan(rows: FloatArray) -> FloatArray:
    if len(rows):
        best: FloatArray = rows.max(axis=0)  # NaN where a row has NaN
        if math.isfinite(best.sum()):
            # No NaN or infinity in any column's max, so none in the rows: the masks
            # below would change nothing.
            return best
    filled = np.where(np.isnan(rows), -np.inf, rows)
    best = filled.max(axis=0) if len(rows) else np.full(rows.shape[1], -np.inf)
    return np.where(np.isinf(best), np.nan, best)


def _quantile_ignoring_nan(rows: FloatArray, quantile: float) -> FloatArray:
    """Per column, the ``quantile`` of its numbers as Prometheus' ``quantile_over_time``
    takes it (rank ``quantile * (n - 1)``, linear between the two nearest), NaN ignored
    (a rule evaluation without data records no sample); NaN where a column has none."""
    if not len(rows):
        return np.full(rows.shape[1], np.nan)
    if not math.isnan(rows.sum()):
        found: FloatArray = np.quantile(rows, quantile, axis=0)
        return found
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # "All-NaN slice": NaN is the answer
        found = np.nanquantile(rows, quantile, axis=0)
    return found


def _window_rows(history: _History, rule: Rule, interval_s: float, now_s: float) -> FloatArray:
    """The 5-minute means a rule over a window reads at Unix time ``now_s`` (the last
    evaluation), newest first: every one in the window, or with a subquery step the
    one at or before each multiple of the step (the window's start included, as
    Prometheus 2 takes it)."""
    assert rule.window_s is not None
    window = max(1, round(rule.window_s / interval_s))
    if rule.step_s is None:
        return history.last(window)
    rows = history.last(window + 1)
    first_s = math.ceil((now_s - rule.window_s) / rule.step_s - 1e-9) * rule.step_s
    points = math.floor((now_s - first_s) / rule.step_s + 1e-9) + 1  # the last one at now
    behind_s = now_s - (first_s + rule.step_s * np.arange(points))  # how long before now
    offsets = np.ceil(behind_s / interval_s - 1e-9).astype(np.int64)
    picked: FloatArray = rows[offsets[offsets < len(rows)]]
    return picked


class SimulatedPrometheus:
    """Prometheus for a fixed set of nodes: it scrapes them and runs crane's recording
    rules (module doc); ``rule_value`` is what an instant query of a rule returns."""

    def __init__(
        self,
        metrics: Iterable[str],
        nodes: int,
        *,
        epoch_s: float,
        scrape_interval_s: float,
        rule_interval_s: float,
    ) -> None:
        self.epoch_s = epoch_s
        self.scrape_interval_s = scrape_interval_s
        self.rule_interval_s = rule_interval_s
        self._rules = {metric: rule_of(metric) for metric in metrics}
        self._nodes = nodes
        # What each step since the last scrape added: CPU-seconds per core, and seconds.
        self._interval: list[tuple[FloatArray, float]] = []
        self._cpu_since_scrape_s = 0.0
        # The interval the scraped CPU rate was worked out from (its arrays are kept).
        self._rate_from: list[tuple[FloatArray, float]] | None = None
        # The last step's fraction and seconds, and the CPU-seconds they add.
        self._busy: tuple[FloatArray, float, FloatArray] | None = None
        self._scraped_cpu: FloatArray = np.full(nodes, np.nan)  # rate over the last 2 scrapes
        self._scraped_mem: FloatArray = np.full(nodes, np.nan)
        self._mem_now: FloatArray = np.full(nodes, np.nan)
        self._scrapes = 0
        self._evaluated_at_s = 0.0  # when the rules last ran (seconds since the start)
        # A day of 5-minute means at least (crane's _1d), more for a longer window.
        longest_s = max([_DAY_S, *(r.window_s for r in self._rules.values() if r and r.window_s)])
        evaluations_per = {
            name: max(1, math.ceil(s / rule_interval_s))
            for name, s in (("avg", AVG_WINDOW_S), ("1d", longest_s))
        }
        self._active = {
            r: _History(evaluations_per["avg"], nodes, counts_repeats=True) for r in ("cpu", "mem")
        }
        self._avg_window = max(1, round(AVG_WINDOW_S / rule_interval_s))
        # One more than the window: a subquery reads the evaluation at its start too.
        self._avg = {r: _History(evaluations_per["1d"] + 1, nodes) for r in ("cpu", "mem")}

    def account(self, cpu_fraction: FloatArray, mem_fraction: FloatArray, seconds: float) -> None:
        """Usage (capped at capacity) during the last ``seconds``, as node fractions.
        A read-only array is taken to stay the same numbers (it may be kept as it is)."""
        busy = self._busy
        if busy is None or not (
            busy[0] is cpu_fraction and busy[1] == seconds and not cpu_fraction.flags.writeable
        ):
            # A read-only array is the same numbers while it is the same object.
            busy = self._busy = (cpu_fraction, seconds, cpu_fraction * seconds)
        self._interval.append((busy[2], seconds))
        self._cpu_since_scrape_s += seconds
        self._mem_now = mem_fraction

    def advance(self, t_s: float) -> None:
        """Scrape and run the rules where due at ``t_s`` (seconds since the start)."""
        if is_due(t_s, self.scrape_interval_s):
            self._scrape()
        if is_due(t_s, self.rule_interval_s):
            self._evaluate_rules()
            self._evaluated_at_s = t_s

    def _scrape(self) -> None:
        interval, self._interval = self._interval, []
        # The same steps' arrays as the last rate's (a quiet node) give the same rate.
        if (
            self._scrapes > 0
            and self._cpu_since_scrape_s > 0
            and not _same_interval(interval, self._rate_from)
        ):
            cpu_busy_s = np.zeros(self._nodes)  # summed in the steps' order
            for added, _ in interval:
                cpu_busy_s += added
            self._scraped_cpu = cpu_busy_s / self._cpu_since_scrape_s
            self._scraped_cpu.flags.writeable = False  # kept as it is while quiet
            self._rate_from = interval
        if self._scrapes > 0:
            memory = self._mem_now  # only kept as it is, when it cannot change
            self._scraped_mem = memory.copy() if memory.flags.writeable else memory
        self._cpu_since_scrape_s = 0.0
        self._scrapes += 1

    def _evaluate_rules(self) -> None:
        window = self._avg_window
        for resource, scraped in (("cpu", self._scraped_cpu), ("mem", self._scraped_mem)):
            active, avg = self._active[resource], self._avg[resource]
            active.push(scraped)
            if active.same_in_a_row > window:
                # This window and the last one are the same rows (the last one full):
                # the same mean as last time.
                avg.push(avg.newest())
            else:
                avg.push(_mean_ignoring_nan(active.last(window)))

    def rule_value(self, metric: str) -> FloatArray:
        """The latest evaluation of a metric's rule, per node (NaN: no data)."""
        rule = self._rules.get(metric) or rule_of(metric)
        assert rule is not None, metric  # scenarios are checked for this on load
        history = self._avg[rule.resource]
        if rule.window_s is None:
            return history.last(1)[0] if history.written else np.full(self._nodes, np.nan)
        now_s = self.epoch_s + self._evaluated_at_s
        rows = _window_rows(history, rule, self.rule_interval_s, now_s)
        if not len(rows):
            return np.full(self._nodes, np.nan)
        if rule.quantile is not None:
            return _quantile_ignoring_nan(rows, rule.quantile)
        return _max_ignoring_nan(rows)


class SimulatedMonitoring:
    """Prometheus (``SimulatedPrometheus``) and the annotator for a fixed set of nodes,
    driven by ``advance``: the annotator's syncs and hot values, and the annotations
    the load model reads."""

    def __init__(
        self,
        policy: Policy,
        nodes: int,
        *,
        epoch_s: float,
        scrape_interval_s: float,
        rule_interval_s: float,
        hot_value_interval_s: float,
    ) -> None:
        self.policy = policy
        self.epoch_s = epoch_s
        self.hot_value_interval_s = hot_value_interval_s
        self.sync_periods_s = {entry.name: entry.period_s for entry in policy.spec.sync_policy}
        self.prometheus = SimulatedPrometheus(
            self.sync_periods_s,
            nodes,
            epoch_s=epoch_s,
            scrape_interval_s=scrape_interval_s,
            rule_interval_s=rule_interval_s,
        )
        # Each period once: most steps none is due, and it takes one check per period to see.
        self._distinct_sync_periods_s = list(dict.fromkeys(self.sync_periods_s.values()))
        self._nodes = nodes
        # What is on the nodes: per metric the written fraction and the write time.
        self.values = {m: np.full(nodes, np.nan) for m in self.sync_periods_s}
        self.written_at_s = {m: np.full(nodes, np.nan) for m in self.sync_periods_s}
        self.hot_values = np.zeros(nodes, dtype=np.int64)
        self.hot_written_at_s = np.full(nodes, np.nan)
        self.bindings: dict[int, list[float]] = {}
        self.sync_version = 0  # bumps whenever any metric annotation is written
        self.hot_changed: set[int] = set()  # nodes whose hot value annotation was rewritten
        self.hot_listeners: list[set[int]] = []  # more readers' hot_changed (classes)
        # Bumped on a node whenever any of its annotations is rewritten.
        self.node_version: IntArray = np.zeros(nodes, dtype=np.int64)
        self._annotations: list[tuple[int, dict[str, str]] | None] = [None] * nodes
        # Per metric and node, the annotation's text once made ("": none written yet,
        # None: rewritten since), and what the last sync wrote (value, time) as floats:
        # a rewrite of one metric re-formats that one alone, on the node read.
        self._texts: dict[str, list[str | None]] = {m: [""] * nodes for m in self.values}
        self._written: dict[str, tuple[list[float], list[float]]] = {}
        self._hot_texts: list[str | None] = [""] * nodes  # the same for the hot value
        self._longest_hot_range_s = max(
            (entry.time_range_s for entry in policy.spec.hot_value), default=0.0
        )

    # -- what happens on the nodes ---------------------------------------------------
    def account(self, cpu_fraction: FloatArray, mem_fraction: FloatArray, seconds: float) -> None:
        """Usage during the last ``seconds``, as node fractions (``SimulatedPrometheus``)."""
        self.prometheus.account(cpu_fraction, mem_fraction, seconds)

    def record_binding(self, node: int, at_s: float) -> None:
        self.bindings.setdefault(node, []).append(at_s)

    # -- the pipeline ----------------------------------------------------------------
    def advance(self, t_s: float) -> None:
        """Run whatever is due at simulation time ``t_s`` (seconds since the start)."""
        self.prometheus.advance(t_s)
        due_periods_s = [p for p in self._distinct_sync_periods_s if is_due(t_s, p)]
        if due_periods_s:
            due = [m for m, period_s in self.sync_periods_s.items() if period_s in due_periods_s]
            self._sync(due, t_s)
        if is_due(t_s, self.hot_value_interval_s):
            self._publish_hot_values(t_s)

    def _sync(self, metrics: list[str], t_s: float) -> None:
        for metric in metrics:
            fresh = self.prometheus.rule_value(metric)
            if not math.isnan(fresh.sum()):
                self._sync_every_node(metric, fresh, t_s)
                continue
            has_data = ~np.isnan(fresh)
            # The annotator clamps values above 100 % to 1 and drops negative ones.
            self.values[metric] = np.where(has_data, np.minimum(fresh, 1.0), self.values[metric])
            self.written_at_s[metric] = np.where(has_data, t_s, self.written_at_s[metric])
            self.node_version += has_data
            self._written[metric] = (
                self.values[metric].tolist(),
                self.written_at_s[metric].tolist(),
            )
            texts = self._texts[metric]
            for node in np.flatnonzero(has_data).tolist():
                texts[node] = None
        self.sync_version += 1

    def _sync_every_node(self, metric: str, fresh: FloatArray, t_s: float) -> None:
        """``_sync`` of one metric with a value on every node (no NaN: the sum shows
        one), as most syncs are: the same arrays, without the masks."""
        values = self.values[metric] = np.minimum(fresh, 1.0)
        self.written_at_s[metric] = np.full(self._nodes, t_s)
        self.node_version += 1
        self._written[metric] = (values.tolist(), [t_s] * self._nodes)
        self._texts[metric] = [None] * self._nodes

    def _publish_hot_values(self, t_s: float) -> None:
        now_s = t_s
        for node in list(self.bindings):
            times = [at for at in self.bindings[node] if now_s - at < self._longest_hot_range_s]
            value = hot_value_from_bindings(times, now_s, self.policy.spec.hot_value)
            # Rewritten while non-zero (its validity is 5 minutes), and once more as 0.
            if value > 0 or self.hot_values[node] > 0:
                self.hot_values[node] = value
                self.hot_written_at_s[node] = t_s
                self.hot_changed.add(node)
                for listener in self.hot_listeners:
                    listener.add(node)
                self.node_version[node] += 1
                self._hot_texts[node] = None
            if times:
                self.bindings[node] = times
            else:
                del self.bindings[node]

    # -- what the load model reads ---------------------------------------------------
    def annotations(self, node: int) -> Mapping[str, str]:
        """The node's annotations, in the annotator's exact format (do not modify)."""
        version: int = self.node_version.item(node)
        cached = self._annotations[node]
        if cached is not None and cached[0] == version:
            return cached[1]
        result: dict[str, str] = {}
        for metric in self._texts:
            text = self._text(metric, node)
            if text:
                result[metric] = text
        hot_text = self._hot_text(node)
        if hot_text:
            result[HOT_VALUE_KEY] = hot_text
        self._annotations[node] = (version, result)
        return result

    def annotation(self, node: int, key: str) -> str | None:
        """``annotations(node).get(key)``, made alone: the descheduler reads two
        annotations of every node each round, and a node's whole map was made (every
        metric formatted) for them."""
        if key in self._texts:
            return self._text(key, node) or None
        if key == HOT_VALUE_KEY:
            return self._hot_text(node) or None
        return None

    def _text(self, metric: str, node: int) -> str:
        """A metric's annotation text on a node ("": none written yet)."""
        texts = self._texts[metric]
        text = texts[node]
        if text is None:
            values, written_at_s = self._written[metric]
            text = texts[node] = format_usage(values[node], self.epoch_s + written_at_s[node])
        return text

    def _hot_text(self, node: int) -> str:
        hot_text = self._hot_texts[node]
        if hot_text is None:
            hot_at_s = self.epoch_s + float(self.hot_written_at_s[node])
            hot_text = format_hot_value(int(self.hot_values[node]), hot_at_s)
            self._hot_texts[node] = hot_text
        return hot_text

    def freshest_sample_s(self, node: int) -> Mapping[str, float]:
        """When each metric on the node was last written (seconds since the start)."""
        return {
            metric: float(at[node])
            for metric, at in self.written_at_s.items()
            if not math.isnan(at[node])
        }


def _same_interval(
    interval: list[tuple[FloatArray, float]], before: list[tuple[FloatArray, float]] | None
) -> bool:
    """Whether two scrape intervals added the same arrays (kept, never changed), in the
    same order, over the same seconds."""
    if before is None or len(interval) != len(before):
        return False
    for (added, seconds), (earlier, earlier_s) in zip(interval, before, strict=True):
        if added is not earlier or seconds != earlier_s:
            return False
    return True


def is_due(t_s: float, period_s: float) -> bool:
    ratio = t_s / period_s
    return abs(ratio - round(ratio)) < 1e-9
