#!/usr/bin/env python3
"""What consolidation saves beside a node autoscaler, per scenario and seed (issue 43).

    .venv/bin/python scripts/consolidation_savings.py diurnal-trough \
        tests/fixtures/simulate/diurnal-even.yaml --seeds 10 [--min-spare 45]

A maintainer's script, not a command of loadaware. Per scenario it runs
``default+autoscaler`` (the request-based autoscaler alone), ``loadaware+autoscaler``
and ``loadaware+consolidate+autoscaler`` on seeds 1..N and prints one Markdown row per
seed: node-hours, harm (throttled CPU-minutes + OOM events), pending pod-minutes,
consolidation's evictions, PDB violations; then the median saving and the totals.
``--min-spare P`` sets ``descheduler.consolidation.minSpare`` to P % for CPU and memory;
``--packing T`` gives the scenario the default policy with ``spec.packing`` on at target
T (the extender's packing score; ``default+autoscaler`` uses no extender).
``--extender-weight W`` sets ``scheduler.extenderWeight`` (the shipped weight is 8).
``--no-history`` starts the simulated descheduler's demand history empty (a descheduler
just installed: no rise seen yet) instead of with the scenario's day before it.

After the rows, the request floor: the fewest node-hours any layout that holds the pods'
requests can run (``request_floor_node_hours``), and so the most any request-feasible
consolidation can save on the scenario. Then one line says which parts of issue 43's bar
hold over the seeds: at least 20 % fewer node-hours than ``default+autoscaler`` on every
seed, no more harm, at most 10 % more pending pod-minutes in all, no PDB violation, no
opted-out pod evicted by the descheduler. The exit status is 0 whatever they say (a
report, not a gate; the test ``tests/simulate/test_consolidation_bar.py`` pins the bar
on fewer seeds).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import yaml

from app.policy import DEFAULT_POLICY_YAML
from app.simulate.autoscaling import opted_out
from app.simulate.cluster import SimulatedCluster
from app.simulate.consolidation import ConsolidatingRebalancer
from app.simulate.policies import plan_for
from app.simulate.profiles import replicas_wanted
from app.simulate.scenario import Scenario, load_scenario
from app.simulate.summary import Summary, summarise

BASE, ALONE, CONSOLIDATED = (
    "default+autoscaler",
    "loadaware+autoscaler",
    "loadaware+consolidate+autoscaler",
)


def with_min_spare(scenario: Scenario, percent: float | None) -> Scenario:
    if percent is None:
        return scenario
    descheduler = dict(scenario.descheduler or {})
    descheduler["consolidation"] = {"minSpare": {"cpu": percent, "memory": percent}}
    return scenario.model_copy(update={"descheduler": descheduler})


def opted_out_evictions(cluster: SimulatedCluster) -> int:
    """The descheduler's evictions of pods whose workload opted out (safe-to-evict
    "false", do-not-disrupt "true"): 0 is the rule (the autoscaler's own scale-down is
    not counted)."""
    workloads = cluster.state.scenario.workloads
    return sum(
        1
        for eviction in cluster.state.run.evictions
        if eviction.by == "descheduler"
        and opted_out(workloads[int(cluster.state.usage.workload_of[eviction.slot])].annotations)
    )


def with_packing(scenario: Scenario, target: float | None) -> Scenario:
    if target is None:
        return scenario
    document = yaml.safe_load(DEFAULT_POLICY_YAML)
    document["spec"]["packing"] = {"enabled": True, "target": target}
    return scenario.model_copy(update={"policy": document})


def request_floor_node_hours(scenario: Scenario) -> float:
    """A lower bound on the node-hours of any layout that holds the pods' requests: at
    each step the fewest of the scenario's nodes whose allocatable covers the requests
    of the pods wanted then, CPU and memory each (the largest nodes first; DaemonSet
    pods' requests taken off every node), never fewer than the autoscaler's minNodes.
    Fragmentation is ignored, so no request-feasible layout runs fewer: consolidation,
    which drains a node only when its pods fit elsewhere by requests, cannot save more
    than ``1 - floor / node-hours of default+autoscaler``."""
    daemons = [w for w in scenario.workloads if w.kind == "DaemonSet"]
    others = [w for w in scenario.workloads if w.kind != "DaemonSet"]
    daemon_cpu = sum(w.pod_requests_and_limits[0].cpu_cores for w in daemons)
    daemon_memory = sum(w.pod_requests_and_limits[0].memory_bytes for w in daemons)
    nodes = [group for group in scenario.nodes for _ in range(group.count)]
    cpus = sorted((g.cpu - daemon_cpu for g in nodes), reverse=True)
    memories = sorted((g.memory - daemon_memory for g in nodes), reverse=True)
    least = scenario.autoscaler.min_nodes if scenario.autoscaler is not None else 1

    def fewest(capacities: list[float], demand: float) -> int:
        total = 0.0
        for count, capacity in enumerate(capacities, start=1):
            total += capacity
            if total >= demand - 1e-9:
                return count
        return len(capacities)

    counts = 0
    for step in range(scenario.steps):
        t_s = step * scenario.step_s
        wanted = [replicas_wanted(w, t_s) for w in others]
        requests = [w.pod_requests_and_limits[0] for w in others]
        cpu = sum(n * r.cpu_cores for n, r in zip(wanted, requests, strict=True))
        memory = sum(n * r.memory_bytes for n, r in zip(wanted, requests, strict=True))
        counts += max(least, fewest(cpus, cpu), fewest(memories, memory))
    return counts * scenario.step_s / 3600


def harm(summary: Summary) -> float:
    return summary.throttled_cpu_minutes + summary.oom_events


def with_extender_weight(scenario: Scenario, weight: int | None) -> Scenario:
    if weight is None:
        return scenario
    scheduler = scenario.scheduler.model_copy(update={"extender_weight": weight})
    return scenario.model_copy(update={"scheduler": scheduler})


def report(
    name: str,
    seeds: int,
    min_spare: float | None,
    packing: float | None = None,
    extender_weight: int | None = None,
) -> None:
    scenario = with_extender_weight(
        with_packing(with_min_spare(load_scenario(name), min_spare), packing), extender_weight
    )
    print(f"\n### {scenario.name} (seeds 1-{seeds}, minSpare {min_spare or 'default'})\n")
    print(
        "| seed | node-h CA | node-h consolidated | saved | harm CA / cons. | pending CA / "
        "loadaware / cons. | evictions | PDB violations | opted-out pods evicted by "
        "the descheduler |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    saved = []
    totals = [0.0, 0.0, 0.0]
    more_harm = violations = opted_out_total = evicted = 0
    least_base = math.inf
    for seed in range(1, seeds + 1):
        seeded = scenario.model_copy(update={"seed": seed})
        base, alone = (
            summarise(SimulatedCluster(seeded, plan_for(policy)).simulate())
            for policy in (BASE, ALONE)
        )
        consolidated = SimulatedCluster(seeded, plan_for(CONSOLIDATED))
        cons = summarise(consolidated.simulate())
        opted_out = opted_out_evictions(consolidated)
        saving = 1 - cons.node_hours / base.node_hours
        least_base = min(least_base, base.node_hours)
        saved.append(saving)
        for i, summary in enumerate((base, alone, cons)):
            totals[i] += summary.pending_pod_minutes
        more_harm += harm(cons) > harm(base) + 1e-9
        violations += cons.pdb_violations
        opted_out_total += opted_out
        evicted += cons.evictions
        print(
            f"| {seed} | {base.node_hours:.1f} | {cons.node_hours:.1f} | {saving:.1%} | "
            f"{harm(base):.1f} / {harm(cons):.1f} | {base.pending_pod_minutes:.0f} / "
            f"{alone.pending_pod_minutes:.0f} / {cons.pending_pod_minutes:.0f} | "
            f"{cons.evictions} | {cons.pdb_violations} | {opted_out} |"
        )
    floor = request_floor_node_hours(scenario)
    print(
        f"\nrequest floor: no layout that holds the requests runs fewer than {floor:.1f} "
        f"node-hours; at most {1 - floor / least_base:.1%} fewer than default+autoscaler "
        f"(its fewest node-hours over the seeds, {least_base:.1f})"
    )
    print(
        f"\nmedian saved {statistics.median(saved):.1%} (lowest {min(saved):.1%}); pending "
        f"pod-minutes in all: {totals[0]:.0f} CA alone, {totals[1]:.0f} loadaware+CA, "
        f"{totals[2]:.0f} consolidated"
    )
    pending_ok = totals[2] <= 1.1 * totals[0] + 1e-9
    print(
        f"\nbar: >= 20 % fewer node-hours on every seed: {_yes(min(saved) >= 0.2)}; no more "
        f"harm: {_yes(not more_harm)}; <= 10 % more pending pod-minutes: {_yes(pending_ok)}; "
        f"PDB violations: {violations}; opted-out pods evicted: {opted_out_total}; "
        f"consolidation's evictions: {evicted}"
    )


def _yes(holds: bool) -> str:
    return "yes" if holds else "NO"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenarios", nargs="+")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--min-spare", type=float, default=None)
    parser.add_argument("--packing", type=float, default=None, metavar="TARGET")
    parser.add_argument("--no-history", action="store_true")
    parser.add_argument("--extender-weight", type=int, default=None, metavar="W")
    args = parser.parse_args()
    ConsolidatingRebalancer.seed_history = not args.no_history
    for name in args.scenarios:
        report(name, args.seeds, args.min_spare, args.packing, args.extender_weight)


if __name__ == "__main__":
    main()
