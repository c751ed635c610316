#!/usr/bin/env python3
"""How far below ``default`` soft taints could take a scenario's node-minutes above the
limits: a floor no placement of the same pods can go under, beside what ``default``,
``default+taints`` and ``loadaware`` reach.

    .venv/bin/python scripts/soft_taint_floor.py burst evenly-busy --seeds 5

A maintainer's script, not a command of loadaware (docs/simulate-results.md quotes
it). Per scenario and seed it prints one Markdown row:

* node-minutes above the limits (CPU and memory together) under ``default``,
  ``default+taints`` and ``loadaware`` (with the pods loadaware never bound);
* ``steered``: the choices in which the taints told feasible nodes apart. 0: no pod
  was placed while a node carried the taint, so the run is ``default``'s, step for
  step, whatever the rule;
* ``floor <= H``: a lower bound on the node-minutes above the limits of *any*
  placement of the pods ``default+taints`` bound, at every step, that keeps every node
  at or below ``H`` of its allocatable (1.0: no throttling, no OOM). Per resource and
  step, with the pods' demands ``u`` as fractions of a node (the nodes must be alike),
  ``N`` nodes and limit ``L``: at least ``(sum(u) - N L) / (H - L)`` nodes are above
  ``L`` (the others hold at most ``L`` each, those above at most ``H``), and at least
  as many as the pods above ``max(L, H / 2)`` (each puts its node above ``L``, and no
  two share a node at or below ``H``). It knows the future and moves pods at will, so
  no scheduler reaches it; where it equals ``default``'s, nothing can do better.
"""

from __future__ import annotations

import argparse
import math
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make the repository's `app` importable
    sys.path.insert(0, str(ROOT))

from app.simulate.cluster import SimulatedCluster  # noqa: E402
from app.simulate.policies import plan_for  # noqa: E402
from app.simulate.scenario import load_scenario  # noqa: E402
from app.simulate.summary import Summary, summarise  # noqa: E402

HARM_LINES = (1.0, 0.9)


@dataclass(frozen=True)
class Row:
    name: str
    seed: int
    default: float
    taints: float
    loadaware: float
    never_bound: int
    steered: int
    floors: tuple[float, ...]


def above(summary: Summary) -> float:
    return summary.cpu_node_minutes_above + summary.memory_node_minutes_above


def nodes_above_at_least(
    demands: npt.NDArray[np.float64], nodes: int, limit: float, harm: float
) -> int:
    by_sum = math.ceil((float(demands.sum()) - nodes * limit) / (harm - limit) - 1e-9)
    alone = int(np.count_nonzero(demands > max(limit, harm / 2)))
    return max(0, by_sum, alone)


def measure(name: str, seed: int) -> Row:
    scenario = load_scenario(name).model_copy(update={"seed": seed})
    runs = {p: summarise(SimulatedCluster(scenario, plan_for(p)).simulate())
            for p in ("default", "loadaware")}  # fmt: skip
    cluster = SimulatedCluster(scenario, plan_for("default+taints"))
    cpu_alloc, memory_alloc = cluster.state.allocatable_cpu, cluster.state.allocatable_memory
    if np.ptp(cpu_alloc) or np.ptp(memory_alloc):
        raise SystemExit(f"{name}: the floor needs nodes that are all alike")
    limits = {p.name: p.max_limit_fraction for p in cluster.state.policy.spec.predicate}
    lines = ((0, float(cpu_alloc[0]), limits["cpu_usage_avg_5m"]),
             (1, float(memory_alloc[0]), limits["mem_usage_avg_5m"]))  # fmt: skip
    nodes_above = np.zeros(len(HARM_LINES))
    for step in range(scenario.steps):
        cluster.step(step)
        usage = cluster.state.usage.at(step, step * scenario.step_s)
        bound = cluster.state.node_of >= 0
        for resource, allocatable, limit in lines:
            demands = usage[resource][bound] / allocatable
            for i, harm in enumerate(HARM_LINES):
                nodes_above[i] += nodes_above_at_least(demands, len(cpu_alloc), limit, harm)
    step_min = scenario.step_s / 60.0
    return Row(
        name,
        seed,
        above(runs["default"]),
        above(summarise(cluster.state.run)),
        above(runs["loadaware"]),
        runs["loadaware"].pending_at_end,
        cluster.scheduler.taint_steered,
        tuple(float(n) * step_min for n in nodes_above),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="+")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    cases = [(name, seed) for name in args.scenarios for seed in range(1, args.seeds + 1)]
    floors = " | ".join(f"floor <= {h:g}" for h in HARM_LINES)
    print(f"| scenario | seed | default | default+taints | loadaware | steered | {floors} |")
    print("|---|---|---|---|---|---|" + "---|" * len(HARM_LINES))
    with ProcessPoolExecutor(args.jobs) as pool:
        for row in pool.map(measure, *zip(*cases, strict=True)):
            cells = " | ".join(f"{f:.0f}" for f in row.floors)
            loadaware = f"{row.loadaware:.0f} ({row.never_bound} never bound)"
            print(f"| {row.name} | {row.seed} | {row.default:.0f} | {row.taints:.0f} | "
                  f"{loadaware} | {row.steered} | {cells} |", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
