"""Why pods wait: each policy's pending pod-minutes, split by what kept the pods off.

    .venv/bin/python scripts/pending_causes.py diurnal-trough --seeds 10 \\
        --policies default+autoscaler,loadaware+autoscaler

After each step's scheduling pass, every pod still pending is one of two kinds:

- **held**: it fits a node that takes pods (running, not drained) by requests, so what
  kept it off is loadaware's side: the load filter, or an estimate's room check (classes,
  node pools). A node autoscaler adds nothing for it (autoscaler#506);
- **no room**: it fits no such node by requests: it waits for a node to be added, under
  any scheduler.

Per seed and policy: the pending pod-minutes of each kind, and the node-steps at which
a node that takes pods failed the load filter while pods waited. The last lines give,
over the seeds, each kind's pod-minutes by hour of the day and workload. Issue 43 used
it to find where ``loadaware+autoscaler`` waits more than ``default+autoscaler``.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.simulate.cluster import SimulatedCluster  # noqa: E402
from app.simulate.policies import plan_for  # noqa: E402
from app.simulate.scenario import Scenario, load_scenario  # noqa: E402

POLICIES = ("default+autoscaler", "loadaware+autoscaler")


@dataclass
class Causes:
    """One run's pending pod-minutes by kind, keyed by (hour of the day, workload)."""

    held: defaultdict[tuple[int, str], float] = field(default_factory=lambda: defaultdict(float))
    no_room: defaultdict[tuple[int, str], float] = field(default_factory=lambda: defaultdict(float))
    refused_node_steps: int = 0

    def add(self, other: Causes) -> None:
        for mine, theirs in ((self.held, other.held), (self.no_room, other.no_room)):
            for key, minutes in theirs.items():
                mine[key] += minutes
        self.refused_node_steps += other.refused_node_steps


class _Traced(SimulatedCluster):
    """A run that sorts the pods left pending by each scheduling pass."""

    causes: Causes

    def schedule_pending(self, t_s: float) -> int:
        waiting = super().schedule_pending(t_s)
        if not waiting:
            return waiting
        state = self.state
        step_min = state.scenario.step_s / 60.0
        hour = int(t_s // 3600) % 24
        names = [w.name for w in state.scenario.workloads]
        for slot in state.pending(t_s).tolist():
            workload = state.usage.workload_of.item(slot)
            # A node that takes no pods (not running, drained) fits no pod by requests.
            fits = bool(state.requests.fits(state.shapes[workload]).any())
            kind = self.causes.held if fits else self.causes.no_room
            kind[(hour, names[workload])] += step_min
        if self.load_filter is not None:
            takes_pods = getattr(self.autoscaler, "usable", None)
            refused = ~self.load_filter.passes
            if takes_pods is not None:
                refused = refused & takes_pods
            self.causes.refused_node_steps += int(np.count_nonzero(refused))
        return waiting


def pending_causes(scenario: Scenario, policy: str) -> Causes:
    run = _Traced(scenario, plan_for(policy))
    run.causes = Causes()
    run.simulate()
    return run.causes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("scenario", help="a built-in scenario's name or a scenario file")
    parser.add_argument("--seeds", type=int, default=10, help="seeds 1..N (default 10)")
    parser.add_argument("--policies", default=",".join(POLICIES))
    args = parser.parse_args(argv)
    scenario = load_scenario(args.scenario)
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    print(f"### {scenario.name} (seeds 1-{args.seeds})\n")
    print("| seed | policy | pending pod-min | held (fit by requests) | no room | refused nodes |")
    print("|---|---|---|---|---|---|")
    totals: dict[str, Causes] = {policy: Causes() for policy in policies}
    for seed in range(1, args.seeds + 1):
        seeded = scenario.model_copy(update={"seed": seed})
        for policy in policies:
            causes = pending_causes(seeded, policy)
            held, no_room = sum(causes.held.values()), sum(causes.no_room.values())
            print(
                f"| {seed} | {policy} | {held + no_room:g} | {held:g} | {no_room:g} | "
                f"{causes.refused_node_steps} |"
            )
            totals[policy].add(causes)
    print()
    for policy, total in totals.items():
        held, no_room = sum(total.held.values()), sum(total.no_room.values())
        print(
            f"{policy}: {held + no_room:g} pending pod-minutes: {held:g} held, "
            f"{no_room:g} with no room"
        )
        for label, kind in (("held", total.held), ("no room", total.no_room)):
            for (hour, workload), minutes in sorted(kind.items()):
                print(f"  {label}: {hour:02d}h {workload}: {minutes:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
