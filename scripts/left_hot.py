"""Why sources stay hot: issue 40's 1.25x bar, the causes behind each miss.

    .venv/bin/python scripts/left_hot.py --seeds 1-20 --scenarios \\
        tests/fixtures/simulate/two-peaks-two-groups.yaml

Per scenario and seed, for ``loadaware+desched`` and ``default+taints+desched``: the
node-minutes above the limits (CPU + memory), and the source-minutes (a source node
times the descheduler's interval) that a round left hot without evicting anything from
it, by the skip codes of its pods (``no_destination``, ``cooldown``, ...; ``untainted``:
a hot node without the soft taint). For ``no_destination`` beside soft taints, the
node kube-scheduler was predicted to choose: how many of those source-minutes named a
node this run had evicted from before (the descheduler's own evictions made it the
emptiest by requests). The last lines sum each column over the seeds.

``scripts/managed_clusters.py`` says whether the bar holds; this says why not.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from managed_clusters import seeds_of  # noqa: E402

from app.simulate.cluster import SimulatedCluster  # noqa: E402
from app.simulate.descheduling import PlanRecord  # noqa: E402
from app.simulate.policies import plan_for  # noqa: E402
from app.simulate.scenario import load_scenario  # noqa: E402
from app.simulate.summary import summarise  # noqa: E402

POLICIES = ("loadaware+desched", "default+taints+desched")
_LANDING = re.compile(r"would place the replacement on (\S+) \(best score")


def left_hot(plans: list[PlanRecord], interval_min: float) -> tuple[dict[str, float], float]:
    """Source-minutes left hot by skip codes, and of the ``no_destination`` ones, those
    whose predicted landing is a node evicted from earlier in the run."""
    minutes: defaultdict[str, float] = defaultdict(float)
    magnet = 0.0
    evicted_from: set[str] = set()
    for record in plans:
        plan = record.plan
        moved = {eviction.source for eviction in plan.evictions}
        for name, node_class in plan.node_classes.items():
            if node_class.kind.value == "untainted":
                minutes["untainted"] += interval_min
            if node_class.kind.value != "source" or name in moved:
                continue
            skipped = [s for s in plan.skipped if s.node == name]
            codes = sorted({s.code.value for s in skipped})
            code = "no_destination" if "no_destination" in codes else "+".join(codes) or "none"
            minutes[code] += interval_min
            if code == "no_destination":
                landing = next(
                    (m.group(1) for s in skipped if (m := _LANDING.search(s.reason))), None
                )
                if landing in evicted_from:
                    magnet += interval_min
        evicted_from |= moved
    return minutes, magnet


def _shown(minutes: dict[str, float]) -> str:
    ordered = sorted(minutes.items(), key=lambda item: -item[1])
    return ", ".join(f"{code} {value:.0f}" for code, value in ordered)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="1-3", help="a range such as 1-20 (default 1-3)")
    parser.add_argument("--scenarios", default="tests/fixtures/simulate/two-peaks-two-groups.yaml")
    args = parser.parse_args()
    totals: dict[str, defaultdict[str, float]] = {p: defaultdict(float) for p in POLICIES}
    print("| scenario | seed | policy | above | source-minutes left hot, by skip code "
          "| no_destination on a node evicted from |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for name in args.scenarios.split(","):
        for seed in seeds_of(args.seeds):
            scenario = load_scenario(name).model_copy(update={"seed": seed})
            interval_min = scenario.descheduler_config().interval / 60.0
            for policy in POLICIES:
                cluster = SimulatedCluster(scenario, plan_for(policy))
                summary = summarise(cluster.simulate())
                above = summary.cpu_node_minutes_above + summary.memory_node_minutes_above
                rebalancer = cluster.rebalancer
                plans: list[PlanRecord] = getattr(rebalancer, "plans", [])
                minutes, magnet = left_hot(plans, interval_min)
                for code, value in {"above": above, "magnet": magnet, **minutes}.items():
                    totals[policy][code] += value
                shown = _shown(minutes)
                print(
                    f"| {Path(name).stem} | {seed} | {policy} | {above:.0f} | {shown or '-'} "
                    f"| {magnet:.0f} |",
                    flush=True,
                )
    for policy, total in totals.items():
        above, magnet = total.pop("above", 0.0), total.pop("magnet", 0.0)
        shown = _shown(total)
        print(f"| all | - | {policy} | {above:.0f} | {shown or '-'} | {magnet:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
