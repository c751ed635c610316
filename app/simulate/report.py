"""Numbers and pictures from runs: the comparison table, JSON, and PNG heat maps.

Utilisation is demand over allocatable, per node and step, so it can pass 100 %:
the excess is throttled CPU or, for memory, an OOM event. "Above the limit" uses the
policy's filter limits for ``cpu_usage_avg_5m`` and ``mem_usage_avg_5m``; the JSON
also has the node-minutes above every predicate's limit.

What users feel besides load: pods waiting for a node (pending pod-minutes, the most
pending at once, and the time from a pod's creation to its binding, p50 and p95 over
the pods that were bound), pods never bound by the end, and evictions, with the pods
evicted more than once. The Markdown table keeps the columns that tell policies apart;
``--json`` has every number.
"""

from __future__ import annotations

import importlib.util
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from app.policy.schema import resource_of_metric
from app.simulate.cluster import Run

PLOTS_HINT = "for PNG plots install the extra: pip install 'loadaware[simulate]'"


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
    node_minutes_above: dict[str, float]  # per predicate with a limit: "metric > limit"


def _limit(run: Run, metric: str) -> float:
    for predicate in run.scenario.scheduling_policy().spec.predicate:
        if predicate.name == metric and predicate.max_limit_fraction > 0:
            return predicate.max_limit_fraction
    return 1.0


def _above_each_limit(run: Run, step_min: float) -> dict[str, float]:
    found = {}
    for predicate in run.scenario.scheduling_policy().spec.predicate:
        limit = predicate.max_limit_fraction
        series = {"cpu": run.cpu_utilisation, "memory": run.memory_utilisation}.get(
            resource_of_metric(predicate.name) or ""
        )
        if limit > 0 and series is not None:
            found[f"{predicate.name} > {limit:g}"] = float(np.sum(series > limit) * step_min)
    return found


def summarise(run: Run) -> Summary:
    cpu, memory = run.cpu_utilisation, run.memory_utilisation
    step_min = run.scenario.step_s / 60.0
    cpu_limit = _limit(run, "cpu_usage_avg_5m")
    memory_limit = _limit(run, "mem_usage_avg_5m")
    waits = np.array(run.waits_s) if run.waits_s else np.zeros(1)
    evicted = Counter(eviction.slot for eviction in run.evictions)
    return Summary(
        policy=run.policy,
        cpu_peak=float(cpu.max()),
        cpu_p95=float(np.percentile(cpu, 95)),
        memory_peak=float(memory.max()),
        memory_p95=float(np.percentile(memory, 95)),
        cpu_threshold=cpu_limit,
        memory_threshold=memory_limit,
        cpu_node_minutes_above=float(np.sum(cpu > cpu_limit) * step_min),
        memory_node_minutes_above=float(np.sum(memory > memory_limit) * step_min),
        cpu_spread=float(cpu.std(axis=1).mean()),
        memory_spread=float(memory.std(axis=1).mean()),
        throttled_cpu_minutes=run.throttled_core_s / 60.0,
        oom_events=run.oom_events,
        pending_at_end=run.pending_at_end,
        evictions=len(run.evictions),
        pdb_violations=sum(1 for e in run.evictions if e.pdb_violation),
        load_evaluations=run.load_evaluations,
        pending_pod_minutes=float(sum(run.pending) * step_min),
        most_pending=max(run.pending, default=0),
        wait_p50_s=float(np.percentile(waits, 50)),
        wait_p95_s=float(np.percentile(waits, 95)),
        pods_evicted_repeatedly=sum(1 for times in evicted.values() if times > 1),
        node_minutes_above=_above_each_limit(run, step_min),
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
        )
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def as_json(scenario: str, seed: int, summaries: Sequence[Summary]) -> dict[str, Any]:
    return {"scenario": scenario, "seed": seed, "policies": [asdict(s) for s in summaries]}


def plots_available() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def write_plots(runs: Sequence[Run], directory: Path) -> Path:
    """One PNG: per policy a node x time CPU heat map, evictions below on the same axis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    directory.mkdir(parents=True, exist_ok=True)
    scenario = runs[0].scenario
    hours = runs[0].times_s / 3600.0
    end_h = float(hours[-1]) + scenario.step_s / 3600.0
    figure, axes = plt.subplots(
        2,
        len(runs),
        figsize=(4.2 * len(runs), 5.2),
        squeeze=False,
        gridspec_kw={"height_ratios": [4, 1]},
        sharex=True,
    )
    image = None
    for column, run in enumerate(runs):
        heat, bars = axes[0][column], axes[1][column]
        image = heat.imshow(
            run.cpu_utilisation.T,
            aspect="auto",
            origin="lower",
            cmap="inferno",
            vmin=0.0,
            vmax=1.2,
            extent=(0.0, end_h, 0, len(run.node_names)),
            interpolation="nearest",
        )
        heat.set_title(run.policy, fontsize=10)
        if column == 0:
            heat.set_ylabel("node")
        times = [e.t_s / 3600.0 for e in run.evictions]
        bins = max(1, min(200, scenario.steps))
        bars.hist(times, bins=bins, range=(0.0, end_h), color="tab:blue")
        bars.set_xlabel("hours")
        if column == 0:
            bars.set_ylabel("evictions")
    if image is not None:
        figure.colorbar(image, ax=[row[-1] for row in axes], label="CPU demand / allocatable")
    figure.suptitle(f"{scenario.name}: node CPU utilisation over time", fontsize=11)
    path = directory / f"{scenario.name}.png"
    figure.savefig(path, dpi=80)
    plt.close(figure)
    return path
