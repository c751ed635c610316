"""Numbers and pictures from runs: the comparison table, JSON, and PNG heat maps.

Utilisation is demand over allocatable, per node and step, so it can pass 100 %:
the excess is throttled CPU or, for memory, an OOM event. "Above threshold" uses the
policy's filter limits for ``cpu_usage_avg_5m`` and ``mem_usage_avg_5m``.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

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


def _limit(run: Run, metric: str) -> float:
    for predicate in run.scenario.scheduling_policy().spec.predicate:
        if predicate.name == metric and predicate.max_limit_fraction > 0:
            return predicate.max_limit_fraction
    return 1.0


def summarise(run: Run) -> Summary:
    cpu, memory = run.cpu_utilisation, run.memory_utilisation
    step_min = run.scenario.step_s / 60.0
    cpu_limit = _limit(run, "cpu_usage_avg_5m")
    memory_limit = _limit(run, "mem_usage_avg_5m")
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
    )


_COLUMNS = (
    "policy",
    "CPU peak",
    "CPU p95",
    "mem peak",
    "mem p95",
    "CPU>limit node-min",
    "mem>limit node-min",
    "CPU sd",
    "mem sd",
    "throttled CPU-min",
    "OOM events",
    "pending",
    "evictions",
    "PDB violations",
)


def _pct(value: float) -> str:
    return f"{value * 100:.0f}%"


def markdown_table(summaries: Sequence[Summary]) -> str:
    lines = ["| " + " | ".join(_COLUMNS) + " |", "|" + "---|" * len(_COLUMNS)]
    for s in summaries:
        cells = (
            s.policy,
            _pct(s.cpu_peak),
            _pct(s.cpu_p95),
            _pct(s.memory_peak),
            _pct(s.memory_p95),
            f"{s.cpu_node_minutes_above:.0f}",
            f"{s.memory_node_minutes_above:.0f}",
            _pct(s.cpu_spread),
            _pct(s.memory_spread),
            f"{s.throttled_cpu_minutes:.1f}",
            str(s.oom_events),
            str(s.pending_at_end),
            str(s.evictions),
            str(s.pdb_violations),
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
