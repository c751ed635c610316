#!/usr/bin/env python3
"""What classes of pods buy, per seed (issue 45): a scenario whose policy has
``classes`` against the same policy without them.

    .venv/bin/python scripts/class_gains.py tests/fixtures/simulate/batch-beside-services.yaml \
        --seeds 10 [--policy loadaware+desched] [--protect production] [--batch batch]

A maintainer's script, not a command of loadaware. Per seed it runs the scenario as it
is (with classes) and with ``spec.classes`` removed, under one policy, and prints one
Markdown row: the protected class's throttled CPU-minutes, the batch class's pending
pod-minutes, node-minutes above the policy's limits, every pod's throttled CPU-minutes
and the protected class's pending pod-minutes (not in the bar), for both; then the totals and
whether the issue's bar holds on every seed (throttled at most half, pending at most
1.2x, node-minutes above the limits no more, every pod's throttled CPU no more).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.simulate.classes import class_measures
from app.simulate.cluster import SimulatedCluster
from app.simulate.policies import plan_for
from app.simulate.scenario import Scenario, load_scenario
from app.simulate.summary import summarise


def without_classes(scenario: Scenario) -> Scenario:
    assert scenario.policy is not None, "the scenario's policy has no classes"
    policy = dict(scenario.policy)
    policy["spec"] = {k: v for k, v in policy["spec"].items() if k != "classes"}
    return scenario.model_copy(update={"policy": policy, "name": f"{scenario.name}-no-classes"})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenario")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--policy", default="loadaware")
    parser.add_argument("--protect", default="production")
    parser.add_argument("--batch", default="batch")
    parser.add_argument(
        "--extender-weight", type=int, help="kube-scheduler's extender weight (the scenario's)"
    )
    args = parser.parse_args()
    scenario = load_scenario(args.scenario)
    if args.extender_weight is not None:
        settings = scenario.scheduler.model_copy(update={"extender_weight": args.extender_weight})
        scenario = scenario.model_copy(update={"scheduler": settings})
    weight = scenario.scheduler.extender_weight
    print(f"\n### {scenario.name}, {args.policy}, extenderWeight {weight}, seeds 1-{args.seeds}\n")
    print(
        f"| seed | {args.protect} throttled CPU-min without / with classes | {args.batch} "
        "pending pod-min without / with | node-min above limits without / with | all pods' "
        f"throttled CPU-min without / with | {args.protect} pending pod-min without / with |"
    )
    print("|---|---|---|---|---|---|")
    holds = True
    totals = [0.0] * 10
    for seed in range(1, args.seeds + 1):
        seeded = scenario.model_copy(update={"seed": seed})
        rows = []
        for variant in (without_classes(seeded), seeded):
            run = SimulatedCluster(variant, plan_for(args.policy), by_workload=True).simulate()
            throttled = class_measures(seeded, run, args.protect).throttled_cpu_minutes
            pending = class_measures(seeded, run, args.batch).pending_pod_minutes
            waits = class_measures(seeded, run, args.protect).pending_pod_minutes
            summary = summarise(run)
            above = summary.cpu_node_minutes_above + summary.memory_node_minutes_above
            rows.append((throttled, pending, above, summary.throttled_cpu_minutes, waits))
        (t0, p0, a0, all0, w0), (t1, p1, a1, all1, w1) = rows
        for i, value in enumerate((t0, t1, p0, p1, a0, a1, all0, all1, w0, w1)):
            totals[i] += value
        ok = t1 <= 0.5 * t0 and p1 <= 1.2 * p0 and a1 <= a0 and all1 <= all0
        holds = holds and ok
        print(
            f"| {seed} | {t0:.1f} / {t1:.1f} | {p0:.0f} / {p1:.0f} | {a0:.0f} / {a1:.0f} | "
            f"{all0:.1f} / {all1:.1f} | {w0:.0f} / {w1:.0f} |{'' if ok else ' misses'}"
        )
    t0, t1, p0, p1, a0, a1, all0, all1, w0, w1 = totals
    print(
        f"| total | {t0:.1f} / {t1:.1f} | {p0:.0f} / {p1:.0f} | {a0:.0f} / {a1:.0f} | "
        f"{all0:.1f} / {all1:.1f} | {w0:.0f} / {w1:.0f} |"
    )
    print(f"\nthe bar holds on every seed: {'yes' if holds else 'no'}")


if __name__ == "__main__":
    main()
