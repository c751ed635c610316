#!/usr/bin/env python3
"""What the extender's ``weight`` (the simulator's ``scheduler.extenderWeight``) changes:
each scenario under ``loadaware`` and ``loadaware+desched`` at several weights, beside
``crane`` and ``default`` (which do not read it), over several seeds.

    .venv/bin/python scripts/extender_weight.py --weights 2,8 --seeds 10 \\
        tests/fixtures/simulate/mixed-waves.yaml crane-style-waves ...

A maintainer's script, not a command of loadaware: scheduler-config/README.md quotes
it for the shipped weight (issue 45). With no scenario it runs the four fixtures whose
outcome the weight moves (mixed-waves, crane-style-waves, node-pools, hourly-spikes)
and zones-uneven, which shows its cost. Per scenario it prints one Markdown row per
policy and weight, each number summed over the seeds:

* ``above``: node-minutes above the limits, CPU and memory together (with node pools,
  each node against its own pool's);
* ``harm``: throttled CPU-minutes plus OOM events;
* ``pending``: pod-minutes spent waiting for a node;
* ``hotter``: the seeds on which the row left more node-minutes above the limits than
  ``crane`` on the same seed;
* ``zone`` and ``node``: how evenly each workload the default topology spread applies
  to (a Deployment, ReplicaSet or StatefulSet, not pinned by ``placement``, two replicas
  or more at the end) is spread when the scenario ends, averaged over them and seeds: the
  largest zone's share of its replicas (``-`` without ``topology.kubernetes.io/zone``
  labels) and the most replicas on one node, over the even count (1.00: as even as
  the node count allows).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make the repository's `app` importable
    sys.path.insert(0, str(ROOT))

from app.load import SPREAD_OWNER_KINDS, ZONE_KEY  # noqa: E402
from app.simulate.cluster import Run, SimulatedCluster  # noqa: E402
from app.simulate.policies import plan_for  # noqa: E402
from app.simulate.scenario import load_scenario  # noqa: E402
from app.simulate.summary import summarise  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "simulate"
DEFAULT_SCENARIOS = tuple(
    str(FIXTURES / f"{name}.yaml")
    for name in ("mixed-waves", "crane-style-waves", "node-pools", "hourly-spikes", "zones-uneven")
)
WEIGHTED = ("loadaware", "loadaware+desched")
UNWEIGHTED = ("crane", "default")


@dataclass(frozen=True)
class Outcome:
    above: float
    harm: float
    pending: float
    zone_share: float | None  # None: the nodes carry no zone label
    node_excess: float


def spread(run: Run, workload_of: list[int]) -> tuple[float | None, float]:
    """The largest zone's share and the most-on-one-node over the even count, averaged
    over the spread workloads with two replicas or more where the run ends."""
    spread_kinds = {"Deployment", *SPREAD_OWNER_KINDS}
    spread_workloads = {
        i
        for i, w in enumerate(run.scenario.workloads)
        if w.kind in spread_kinds and not w.placement
    }
    where: dict[int, int] = {}
    events = [(p.t_s, 1, p.slot, p.node) for p in run.placements]
    events += [(e.t_s, 0, e.slot, e.node) for e in run.evictions]
    events += [(d.t_s, 0, d.slot, d.node) for d in run.deletions]
    for _, placed, slot, node in sorted(events):  # at one instant, removals first
        if placed:
            where[slot] = node
        else:
            where.pop(slot, None)
    zones = [labels.get(ZONE_KEY) for labels in run.scenario.node_labels]
    by_workload: dict[int, list[int]] = {}
    for slot, node in where.items():
        by_workload.setdefault(workload_of[slot], []).append(node)
    shares: list[float] = []
    excesses: list[float] = []
    for workload, nodes in by_workload.items():
        if workload not in spread_workloads or len(nodes) < 2:
            continue
        even = math.ceil(len(nodes) / len(run.node_names))
        excesses.append(max(Counter(nodes).values()) / even)
        if all(zone is not None for zone in zones):
            shares.append(max(Counter(zones[n] for n in nodes).values()) / len(nodes))
    zone = sum(shares) / len(shares) if shares else None
    return zone, sum(excesses) / len(excesses) if excesses else 1.0


def simulate(scenario_name: str, policy: str, weight: int, seed: int) -> Outcome:
    scenario = load_scenario(scenario_name)
    settings = scenario.scheduler.model_copy(update={"extender_weight": weight})
    scenario = scenario.model_copy(update={"seed": seed, "scheduler": settings})
    cluster = SimulatedCluster(scenario, plan_for(policy))
    run = cluster.simulate()
    summary = summarise(run)
    zone, node = spread(run, cluster.state.usage.workload_of.tolist())
    return Outcome(
        above=summary.cpu_node_minutes_above + summary.memory_node_minutes_above,
        harm=summary.throttled_cpu_minutes + summary.oom_events,
        pending=summary.pending_pod_minutes,
        zone_share=zone,
        node_excess=node,
    )


def rows(scenario: str, weights: list[int], seeds: list[int], jobs: int) -> list[str]:
    runs = [(policy, 0) for policy in UNWEIGHTED] + [(p, w) for p in WEIGHTED for w in weights]
    tasks = [(scenario, policy, weight or 1, seed) for policy, weight in runs for seed in seeds]
    with ProcessPoolExecutor(jobs) as pool:
        outcomes = list(pool.map(simulate, *zip(*tasks, strict=True)))
    by_run = [outcomes[i * len(seeds) : (i + 1) * len(seeds)] for i in range(len(runs))]
    crane = by_run[0]
    lines = []
    for (policy, weight), results in zip(runs, by_run, strict=True):
        hotter = sum(
            1 for mine, theirs in zip(results, crane, strict=True) if mine.above > theirs.above
        )
        shares = [r.zone_share for r in results if r.zone_share is not None]
        zone = f"{sum(shares) / len(shares):.2f}" if shares else "-"
        lines.append(
            f"| {Path(scenario).stem} | {policy} | {weight or '-'} "
            f"| {sum(r.above for r in results):,.0f} | {sum(r.harm for r in results):,.1f} "
            f"| {sum(r.pending for r in results):,.0f} | {hotter if policy != 'crane' else '-'} "
            f"| {zone} | {sum(r.node_excess for r in results) / len(results):.2f} |"
        )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenarios", nargs="*", help="built-in names or scenario files")
    parser.add_argument("--weights", default="2,8", help="comma-separated extender weights")
    parser.add_argument("--seeds", type=int, default=10, help="seeds 1..N")
    parser.add_argument("--jobs", type=int, default=1, help="processes")
    args = parser.parse_args()
    weights = [int(w) for w in args.weights.split(",")]
    if any(w < 1 for w in weights) or args.seeds < 1 or args.jobs < 1:
        parser.error("weights, --seeds and --jobs must be positive")
    seeds = list(range(1, args.seeds + 1))
    print(f"Seeds 1-{args.seeds}, sums over the seeds (zone, node: means).\n")
    print("| scenario | policy | weight | above | harm | pending | hotter | zone | node |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for scenario in args.scenarios or DEFAULT_SCENARIOS:
        for line in rows(scenario, weights, seeds, args.jobs):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
