"""Which node-minutes above the CPU limit no reading shows: issue 40's last misses.

    .venv/bin/python scripts/spike_minutes.py --seeds 1-20 --scenarios \\
        tests/fixtures/simulate/two-peaks-two-groups.yaml

Per scenario and seed, for ``loadaware+desched`` and ``default+taints+desched``: the
node-minutes above the limits (CPU + memory, the 1.25x bar's measure), and of the CPU
ones those in a 30-second step where the node's 5-minute mean (what the annotator and
the descheduler read, ``cpu_usage_avg_5m``) was at or under the limit: spikes that no
rule sees. Then the minutes from the second half of the day on the nodes whose name
starts with ``a-`` (two-peaks-two-groups' group a, where group b's pods land at its
peak) and, of those, the spikes. The last lines sum each column over the seeds.

``scripts/left_hot.py`` counts the sources left hot by skip codes; this counts the
landings that look cool and are not.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from managed_clusters import seeds_of  # noqa: E402

from app.simulate.cluster import SimulatedCluster  # noqa: E402
from app.simulate.policies import plan_for  # noqa: E402
from app.simulate.scenario import load_scenario  # noqa: E402
from app.simulate.summary import summarise  # noqa: E402

POLICIES = ("loadaware+desched", "default+taints+desched")
MEAN_S = 300.0  # the window of cpu_usage_avg_5m
LATE_S = 12 * 3600.0
COLUMNS = ("above", "CPU above", "spikes only", "a- late", "a- late spikes")


def trailing_mean(series: npt.NDArray[np.float64], steps: int) -> npt.NDArray[np.float64]:
    """Each step's mean over it and the ``steps - 1`` before it (fewer at the start)."""
    total = np.cumsum(np.vstack([np.zeros((1, series.shape[1])), series]), axis=0)
    index = np.arange(len(series))
    first = np.maximum(0, index - steps + 1)
    counts = (index + 1 - first).astype(np.float64)
    return np.asarray((total[index + 1] - total[first]) / counts[:, None], dtype=np.float64)


def one_run(name: str, seed: int, policy: str) -> tuple[float, ...]:
    scenario = load_scenario(name).model_copy(update={"seed": seed})
    run = SimulatedCluster(scenario, plan_for(policy)).simulate()
    summary = summarise(run)
    step_min = scenario.step_s / 60.0
    cpu = run.cpu_utilisation.astype(np.float64)
    limit = summary.cpu_threshold
    mean = trailing_mean(cpu, max(1, round(MEAN_S / scenario.step_s)))
    above = cpu > limit
    spikes = above & (mean <= limit)
    late = (run.times_s >= LATE_S)[:, None] & np.array(
        [node.startswith("a-") for node in run.node_names]
    )
    return (
        summary.cpu_node_minutes_above + summary.memory_node_minutes_above,
        float(above.sum() * step_min),
        float(spikes.sum() * step_min),
        float((above & late).sum() * step_min),
        float((spikes & late).sum() * step_min),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="1-3", help="a range such as 1-20 (default 1-3)")
    parser.add_argument("--scenarios", default="tests/fixtures/simulate/two-peaks-two-groups.yaml")
    args = parser.parse_args()
    totals = {policy: np.zeros(len(COLUMNS)) for policy in POLICIES}
    print(f"| scenario | seed | policy | {' | '.join(COLUMNS)} |")
    print("|---|---|---|" + "---|" * len(COLUMNS))
    for name in args.scenarios.split(","):
        for seed in seeds_of(args.seeds):
            for policy in POLICIES:
                values = one_run(name, seed, policy)
                totals[policy] += values
                shown = " | ".join(f"{value:.0f}" for value in values)
                print(f"| {Path(name).stem} | {seed} | {policy} | {shown} |", flush=True)
    for policy, total in totals.items():
        print(f"| all | - | {policy} | {' | '.join(f'{value:.0f}' for value in total)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
