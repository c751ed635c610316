"""Numbers and pictures from runs: the comparison table, JSON, and PNG heat maps.

Utilisation is demand over allocatable, per node and step, so it can pass 100 %:
the excess is throttled CPU or, for memory, an OOM event. "Above the limit" uses the
policy's filter limits for ``cpu_usage_avg_5m`` and ``mem_usage_avg_5m``; the JSON
also has the node-minutes above every predicate's limit.

What users feel besides load: pods waiting for a node (pending pod-minutes, the most
pending at once, and the time from a pod's creation to its binding, p50 and p95 over
the pods that were bound), pods never bound by the end, and evictions, with the pods
evicted more than once and the evictions judged settleTime later, by outcome as the
descheduler judges its own (``gains``: helped, no effect, backfired; the last two
"bought nothing": their source not cooler by what they used, less noise). The Markdown table
keeps the columns that tell policies apart; ``--json`` has every number.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from app.policy import Policy, resource_of_metric
from app.simulate.cluster import Run


@dataclass(frozen=True, slots=True)
class Summary:
    policy: str
    cpu_peak: float
    cpu_p95: float
    memory_peak: float
    memory_p95: float
    cpu_threshold: float
    memory_threshold: float
    cpu_node_minutes_above: float
    memory_node_minutes_above: float
    cpu_spread: float  # stddev across nodes, averaged over time
    memory_spread: float
    throttled_cpu_minutes: float  # core-minutes of demand above capacity
    oom_events: int
    pending_at_end: int
    evictions: int
    pdb_violations: int
    load_evaluations: int
    pending_pod_minutes: float  # pods waiting for a node, summed over time
    most_pending: int  # the most pods waiting at once
    wait_p50_s: float  # creation to binding, over the pods bound (0 if none)
    wait_p95_s: float
    pods_evicted_repeatedly: int  # pods (slots) evicted more than once
    # Evictions whose source, settleTime later, was not cooler by what they used less
    # noise (app/simulate/gains.py); of those judged (a round near the end is not).
    evictions_bought_nothing: int
    evictions_judged: int
    # The judged evictions by outcome, as the descheduler judges its own
    # (app/rebalance/aftermath.py); no effect + backfired = bought nothing.
    evictions_helped: int
    evictions_no_effect: int
    evictions_backfired: int
    node_minutes_above: dict[str, float]  # per predicate with a limit: "metric > limit"
    # Nodes running or provisioning, summed over time (every node all the time without
    # an autoscaler), and over the pod-hours the workloads wanted (bound or pending).
    node_hours: float = 0.0
    node_hours_per_workload_hour: float = 0.0
    scale_down_evictions: int = 0  # pods the autoscaler's scale-down evicted


def _limit(run: Run, metric: str) -> float:
    for predicate in run.scenario.scheduling_policy().spec.predicate:
        if predicate.name == metric and predicate.max_limit_fraction > 0:
            return predicate.max_limit_fraction
    return 1.0


def _node_limits(run: Run, metric: str) -> float | npt.NDArray[np.float64]:
    """``_limit``, or with node pools each node's own: its pool's (app/policy/pools.py)."""
    policy = run.scenario.scheduling_policy()
    if not policy.spec.node_pools:
        return _limit(run, metric)
    return np.array(
        [dict(policy.for_node(labels).limits).get(metric, 1.0)
         for labels in run.scenario.node_labels],
        dtype=np.float64,
    )  # fmt: skip


def _minutes_above(
    series: npt.NDArray[Any], limits: float | npt.NDArray[np.float64], step_min: float
) -> float:
    return float(np.sum(series > limits) * step_min)


def _above_each_limit(run: Run, step_min: float) -> dict[str, float]:
    """Node-minutes above each predicate's limit; with node pools, each pool's nodes
    against its own limits ("<pool>: <metric> > <limit>"), and the nodes in no pool
    against the policy's (app/policy/pools.py)."""
    policy = run.scenario.scheduling_policy()
    if not policy.spec.node_pools:
        return _above(run, policy, step_min, None, "")
    matches = [policy.node_pools.match(labels) for labels in run.scenario.node_labels]
    in_none = [m.pool is None for m in matches]
    found = _above(run, policy, step_min, in_none, "") if any(in_none) else {}
    for name, _, pool in policy.node_pools.pools:
        in_pool = [m.pool == name for m in matches]
        found.update(_above(run, pool.judged_by, step_min, in_pool, f"{name}: "))
    return found


def _above(
    run: Run, policy: Policy, step_min: float, nodes: list[bool] | None, prefix: str
) -> dict[str, float]:
    found = {}
    for predicate in policy.spec.predicate:
        limit = predicate.max_limit_fraction
        series = {"cpu": run.cpu_utilisation, "memory": run.memory_utilisation}.get(
            resource_of_metric(predicate.name) or ""
        )
        if limit > 0 and series is not None:
            if nodes is not None:
                series = series[:, np.array(nodes, dtype=np.bool_)]
            above = float(np.sum(series > limit) * step_min)
            found[f"{prefix}{predicate.name} > {limit:g}"] = above
    return found


def summarise(run: Run) -> Summary:
    cpu, memory = run.cpu_utilisation, run.memory_utilisation
    step_min = run.scenario.step_s / 60.0
    cpu_limit = _limit(run, "cpu_usage_avg_5m")
    memory_limit = _limit(run, "mem_usage_avg_5m")
    waits = np.array(run.waits_s) if run.waits_s else np.zeros(1)
    evicted = Counter(eviction.slot for eviction in run.evictions)
    step_h = run.scenario.step_s / 3600.0
    node_hours = float(sum(run.nodes_up) * step_h)
    workload_hours = float((sum(run.pods_bound) + sum(run.pending)) * step_h)
    by_autoscaler = sum(1 for e in run.evictions if e.by == "autoscaler")
    return Summary(
        policy=run.policy,
        cpu_peak=float(cpu.max()),
        cpu_p95=float(np.percentile(cpu, 95)),
        memory_peak=float(memory.max()),
        memory_p95=float(np.percentile(memory, 95)),
        cpu_threshold=cpu_limit,
        memory_threshold=memory_limit,
        cpu_node_minutes_above=_minutes_above(cpu, _node_limits(run, "cpu_usage_avg_5m"), step_min),
        memory_node_minutes_above=_minutes_above(
            memory, _node_limits(run, "mem_usage_avg_5m"), step_min
        ),
        cpu_spread=float(cpu.std(axis=1).mean()),
        memory_spread=float(memory.std(axis=1).mean()),
        throttled_cpu_minutes=run.throttled_core_s / 60.0,
        oom_events=run.oom_events,
        pending_at_end=run.pending_at_end,
        evictions=len(run.evictions) - by_autoscaler,
        pdb_violations=sum(1 for e in run.evictions if e.pdb_violation),
        load_evaluations=run.load_evaluations,
        pending_pod_minutes=float(sum(run.pending) * step_min),
        most_pending=max(run.pending, default=0),
        wait_p50_s=float(np.percentile(waits, 50)),
        wait_p95_s=float(np.percentile(waits, 95)),
        pods_evicted_repeatedly=sum(1 for times in evicted.values() if times > 1),
        evictions_bought_nothing=run.evictions_bought_nothing,
        evictions_judged=run.evictions_judged,
        evictions_helped=run.evictions_helped,
        evictions_no_effect=run.evictions_no_effect,
        evictions_backfired=run.evictions_backfired,
        node_minutes_above=_above_each_limit(run, step_min),
        node_hours=node_hours,
        node_hours_per_workload_hour=node_hours / workload_hours if workload_hours else 0.0,
        scale_down_evictions=by_autoscaler,
    )


_COLUMNS = (
    "policy",
    "CPU peak",
    "mem peak",
    "CPU>limit node-min",
    "mem>limit node-min",
    "throttled CPU-min",
    "OOM events",
    "pending pod-min",
    "most pending",
    "wait p50/p95",
    "never bound",
    "evictions",
    "evicted 2+ times",
    "helped",
    "no effect",
    "backfired",
    "node-hours",
    "node-h per pod-h",
    "scale-down evictions",
)


def _pct(value: float) -> str:
    return f"{value * 100:.0f}%"


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f}s"
    return f"{seconds / 60:.0f}m" if seconds < 3600 else f"{seconds / 3600:.1f}h"


def markdown_table(summaries: Sequence[Summary]) -> str:
    lines = ["| " + " | ".join(_COLUMNS) + " |", "|" + "---|" * len(_COLUMNS)]
    for s in summaries:
        cells = (
            s.policy,
            _pct(s.cpu_peak),
            _pct(s.memory_peak),
            f"{s.cpu_node_minutes_above:.0f}",
            f"{s.memory_node_minutes_above:.0f}",
            f"{s.throttled_cpu_minutes:.1f}",
            str(s.oom_events),
            f"{s.pending_pod_minutes:.0f}",
            str(s.most_pending),
            f"{_duration(s.wait_p50_s)} / {_duration(s.wait_p95_s)}",
            str(s.pending_at_end),
            str(s.evictions),
            str(s.pods_evicted_repeatedly),
            str(s.evictions_helped),
            str(s.evictions_no_effect),
            str(s.evictions_backfired),
            f"{s.node_hours:.1f}",
            f"{s.node_hours_per_workload_hour:.3f}",
            str(s.scale_down_evictions),
        )
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


SPREAD_NOTE = (
    "Each cell: the median over the seeds, and in brackets the range (lowest-highest) "
    "where the seeds disagree; a result is one only where the range says the same."
)


def _cells(s: Summary) -> list[tuple[float, str]]:
    """Each column's number and how it is printed, in ``_COLUMNS`` order after policy."""
    return [
        (s.cpu_peak, "pct"),
        (s.memory_peak, "pct"),
        (s.cpu_node_minutes_above, "int"),
        (s.memory_node_minutes_above, "int"),
        (s.throttled_cpu_minutes, "float"),
        (float(s.oom_events), "int"),
        (s.pending_pod_minutes, "int"),
        (float(s.most_pending), "int"),
        (s.wait_p95_s, "duration"),
        (float(s.pending_at_end), "int"),
        (float(s.evictions), "int"),
        (float(s.pods_evicted_repeatedly), "int"),
        (float(s.evictions_helped), "int"),
        (float(s.evictions_no_effect), "int"),
        (float(s.evictions_backfired), "int"),
        (s.node_hours, "float"),
        (s.node_hours_per_workload_hour, "ratio"),
        (float(s.scale_down_evictions), "int"),
    ]


def _show(value: float, kind: str) -> str:
    if kind == "pct":
        return _pct(value)
    if kind == "duration":
        return _duration(value)
    if kind == "ratio":
        return f"{value:.3f}"
    return f"{value:.1f}" if kind == "float" else f"{value:.0f}"


def spread_table(per_seed: Sequence[Sequence[Summary]]) -> str:
    """One row per policy: each number's median across seeds, with its range."""
    columns = [c if c != "wait p50/p95" else "wait p95" for c in _COLUMNS]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for index, first in enumerate(per_seed[0]):
        rows = [_cells(seed[index]) for seed in per_seed]
        cells = [first.policy]
        for column in range(len(rows[0])):
            kind = rows[0][column][1]
            values = sorted(row[column][0] for row in rows)
            median = _show(float(np.median(values)), kind)
            low, high = _show(values[0], kind), _show(values[-1], kind)
            cells.append(median if low == high else f"{median} ({low}-{high})")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


LEGEND = (
    "Lower is better in every column. Peaks are demand over allocatable on the busiest "
    "node and step, so above 100% is demand a node cannot serve (throttled CPU, OOM for "
    "memory); >limit node-min: node-minutes above the policy's filter limit (with node "
    "pools, each node's pool's); pending "
    "pod-min: pods waiting for a node, summed over time; wait: creation to binding; never "
    "bound: pods still waiting for a node when the scenario ends (under a load-aware "
    "policy, because every node they fit was above a filter limit: it holds a pod back "
    "rather than overload a node, so weigh it against throttled CPU-min and OOM events); "
    "evicted 2+ times: pods moved more than once; node-hours: nodes running or provisioning, "
    "summed over time (node-h per pod-h: over the pod-hours the workloads wanted); "
    "scale-down evictions: pods an autoscaler's scale-down evicted."
)

# The columns the verdict names (those that tell policies apart on what users feel),
# as indexes into ``_cells``.
_VERDICT = {
    "CPU peak": 0,
    "CPU>limit node-min": 2,
    "throttled CPU-min": 4,
    "OOM events": 5,
    "pending pod-min": 6,
    "never bound": 9,
    "evictions": 10,
    "node-hours": 15,
}


def verdict(per_seed: Sequence[Sequence[Summary]]) -> str:
    """One line: for each column that tells the policies apart, which did best (the
    lowest; with several seeds, the lowest median)."""
    policies = [s.policy for s in per_seed[0]]
    rows = [[_cells(seed[i]) for seed in per_seed] for i in range(len(policies))]
    said = []
    for column, index in _VERDICT.items():
        kind = rows[0][0][index][1]
        shown = [_show(float(np.median([r[index][0] for r in row])), kind) for row in rows]
        values = [float(np.median([r[index][0] for r in row])) for row in rows]
        if len(set(shown)) == 1:
            continue  # every policy the same: nothing to choose between
        best = min(values)
        winners = [p for p, v, t in zip(policies, values, shown, strict=True)
                   if t == shown[values.index(best)]]  # fmt: skip
        losers = [p for p in policies if p not in winners]
        who = ", ".join(winners) if len(winners) <= len(losers) else (
            "all but " + ", ".join(losers)
        )
        said.append(f"{column} {who} ({shown[values.index(best)]})")
    if not said:
        return "best: every policy alike on this scenario"
    return "best (lowest): " + "; ".join(said)


def as_json(scenario: str, seed: int, summaries: Sequence[Summary]) -> dict[str, Any]:
    return {"scenario": scenario, "seed": seed, "policies": [asdict(s) for s in summaries]}


# Utilisation bands on the heat maps: shades of blue up to the filter limit, of orange
# from the limit to capacity, red above capacity (throttled CPU, OOM for memory).
_BELOW = ("#f7fbff", "#c6dbef", "#6baed6", "#2171b5")
_OVER_LIMIT = ("#fdd0a2", "#fd8d3c", "#d94801")
_OVER_CAPACITY = "#a50f15"
_TOP = 1.5  # the colour scale's end: demand 150 % of allocatable


def _bands(limit: float) -> list[float]:
    below = [limit * i / len(_BELOW) for i in range(len(_BELOW))]
    over = [limit + (1.0 - limit) * i / len(_OVER_LIMIT) for i in range(len(_OVER_LIMIT))]
    return [*below, *over, 1.0, _TOP]


def write_plots(runs: Sequence[Run], directory: Path) -> Path:
    """One PNG per scenario: per policy a row of node x time heat maps of CPU and of
    memory demand, with the filter limit and capacity marked on the colour scale, and
    the policy's evictions beside them (one scale for all rows); below, the pods
    waiting for a node over time under every policy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import BoundaryNorm, ListedColormap
    from matplotlib.ticker import MaxNLocator

    directory.mkdir(parents=True, exist_ok=True)
    scenario = runs[0].scenario
    hours = runs[0].times_s / 3600.0
    end_h = float(hours[-1]) + scenario.step_s / 3600.0
    summaries = [summarise(run) for run in runs]
    limits = {"CPU": summaries[0].cpu_threshold, "memory": summaries[0].memory_threshold}
    plt.rcParams.update({"font.size": 11})
    figure = plt.figure(figsize=(13.0, 2.1 * len(runs) + 3.2), layout="constrained")
    grid = figure.add_gridspec(
        len(runs) + 1, 4, width_ratios=[5, 5, 2.2, 0.25], height_ratios=[2] * len(runs) + [2.4]
    )
    bins = max(1, min(60, scenario.steps))
    per_bin_h = end_h / bins
    eviction_counts = [
        np.histogram([e.t_s / 3600.0 for e in run.evictions], bins=bins, range=(0.0, end_h))[0]
        for run in runs
    ]
    eviction_top = max(1, max(int(counts.max()) for counts in eviction_counts))
    images = {}
    for row, run in enumerate(runs):
        for column, (label, series) in enumerate(
            (("CPU", run.cpu_utilisation), ("memory", run.memory_utilisation))
        ):
            axis = figure.add_subplot(grid[row, column])
            bands = _bands(limits[label])
            colours = ListedColormap([*_BELOW, *_OVER_LIMIT, _OVER_CAPACITY])
            images[label] = axis.imshow(
                series.T,
                aspect="auto",
                origin="lower",
                cmap=colours,
                norm=BoundaryNorm(bands, colours.N, clip=True),
                extent=(0.0, end_h, 0, len(run.node_names)),
                interpolation="nearest",
            )
            axis.yaxis.set_major_locator(MaxNLocator(integer=True, nbins=5))
            axis.set_ylabel(f"{run.policy}\nnode" if column == 0 else "node")
            if row == 0:
                axis.set_title(f"{label} demand / allocatable (limit {limits[label]:.0%})")
            if row < len(runs) - 1:
                axis.tick_params(labelbottom=False)
            else:
                axis.set_xlabel("hours")
        bars = figure.add_subplot(grid[row, 2])
        counts = eviction_counts[row]
        if counts.any():
            bars.bar(
                np.arange(bins) * per_bin_h, counts, width=per_bin_h, align="edge", color="#555"
            )
        else:
            bars.text(0.5, 0.5, "none", ha="center", va="center", transform=bars.transAxes)
        bars.set_xlim(0.0, end_h)
        bars.set_ylim(0, eviction_top * 1.1)
        bars.yaxis.set_major_locator(MaxNLocator(integer=True, nbins=3))
        if row == 0:
            bars.set_title("evictions")
        if row < len(runs) - 1:
            bars.tick_params(labelbottom=False)
        else:
            bars.set_xlabel("hours")
    scale = figure.add_subplot(grid[: len(runs), 3])
    colourbar = figure.colorbar(images["CPU"], cax=scale, spacing="proportional")
    limit = limits["CPU"]
    colourbar.set_ticks([0.0, limit, 1.0, _TOP])
    colourbar.set_ticklabels(["0", f"{limit:.0%} filter limit", "100% capacity", f"{_TOP:.0%}"])
    pending = figure.add_subplot(grid[len(runs), :3])
    for run in runs:
        style = "--" if run.policy.endswith("+desched") else "-"
        pending.step(
            hours, run.pending, where="post", label=run.policy, linewidth=1.6, linestyle=style
        )
    pending.set_xlim(0.0, end_h)
    pending.yaxis.set_major_locator(MaxNLocator(integer=True))
    if max(max(run.pending, default=0) for run in runs) == 0:
        pending.set_ylim(0, 1)
        pending.text(
            0.5,
            0.5,
            "none under any policy",
            ha="center",
            va="center",
            transform=pending.transAxes,
        )
    else:
        pending.set_ylim(bottom=0)
    pending.set_ylabel("pods pending")
    pending.set_xlabel("hours")
    pending.set_title("pods waiting for a node")
    pending.legend(ncols=min(3, len(runs)), fontsize=9, loc="upper right")
    figure.suptitle(f"{scenario.name} (seed {scenario.seed})", fontsize=13)
    path = directory / f"{scenario.name}.png"
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return path
