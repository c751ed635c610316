#!/usr/bin/env python3
"""Is a class of pods held back more than its limits require? (issue 45)

    .venv/bin/python scripts/class_room.py tests/fixtures/simulate/big-batch-beside-services.yaml \
        --seeds 10 [--batch batch] [--workload etl] [--batch-limit 1.0]

A maintainer's script, not a command of loadaware. Per seed it runs the scenario (with its
classes) under ``loadaware`` and, at every step where pods of the workload wait, counts
the pod-minutes waiting and those of them for which some node's room under the class's
limits (its own and, where a higher class runs, that class's: "Beside a higher class")
held what one of the workload's pods uses on average but not the pod's estimate. With
``--batch-limit`` the class's first predicate is set to it (the fixture's 0.95) and the
run's throttled CPU-minutes are printed too.
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.simulate.classes import class_measures
from app.simulate.cluster import SimulatedCluster
from app.simulate.policies import plan_for
from app.simulate.scenario import Scenario, load_scenario
from app.simulate.summary import summarise


def with_class_limit(scenario: Scenario, name: str, limit: float) -> Scenario:
    assert scenario.policy is not None, "the scenario has no policy"
    policy = copy.deepcopy(dict(scenario.policy))
    for entry in policy["spec"]["classes"]:
        if entry["name"] == name:
            entry["predicate"][0]["maxLimitPercent"] = limit
    return scenario.model_copy(update={"policy": policy})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenario")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--batch", default="batch")
    parser.add_argument("--workload", default="etl")
    parser.add_argument("--batch-limit", type=float)
    args = parser.parse_args()
    scenario = load_scenario(args.scenario)
    if args.batch_limit is not None:
        scenario = with_class_limit(scenario, args.batch, args.batch_limit)
    workload = [w.name for w in scenario.workloads].index(args.workload)
    mean_cores = float(scenario.workloads[workload].usage.cpu)
    print(
        f"| seed | pending pod-min | of them with room for the mean ({mean_cores:g} cores) "
        "but not the estimate | the estimate (cores) | every pod's throttled CPU-min |"
    )
    print("|---|---|---|---|---|")
    totals = [0.0, 0.0, 0.0]
    for seed in range(1, args.seeds + 1):
        seeded = scenario.model_copy(update={"seed": seed})
        cluster = SimulatedCluster(seeded, plan_for("loadaware"), by_workload=True)
        state, step_min = cluster.state, seeded.step_s / 60.0
        pending = held = estimate = 0.0
        for step in range(seeded.steps):
            cluster.step(step)
            t_s = step * seeded.step_s
            waiting = int(np.count_nonzero(state.usage.workload_of[state.pending(t_s)] == workload))
            if not waiting:
                continue
            room = cluster.classes.filters[args.batch]
            room.refresh(t_s)
            cores = room.room_cpu * state.requests.allocatable_cpu * room.passes
            estimate = state.shapes[workload].estimate_cpu_cores
            nodes = int(np.count_nonzero((cores >= mean_cores) & (cores < estimate)))
            pending += waiting * step_min
            held += min(waiting, nodes) * step_min
        run = cluster.state.run
        assert class_measures(seeded, run, args.batch).pending_pod_minutes >= pending - 1e-6
        throttled = summarise(run).throttled_cpu_minutes
        for index, value in enumerate((pending, held, throttled)):
            totals[index] += value
        print(f"| {seed} | {pending:.0f} | {held:.0f} | {estimate:.2f} | {throttled:.1f} |")
    print(f"| total | {totals[0]:.0f} | {totals[1]:.0f} | | {totals[2]:.1f} |")


if __name__ == "__main__":
    main()
