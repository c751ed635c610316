#!/usr/bin/env python3
"""What the workload-usage estimate buys on crane-style waves: throttled CPU-minutes with
and without it (``estimation.workloadUsage``), the numbers the README quotes.

    .venv/bin/python scripts/workload_usage_benefit.py --seeds 20

A maintainer's script, not a command of loadaware (README, "Burst-aware estimation";
docs/simulate-results.md). It runs ``tests/fixtures/simulate/crane-style-waves.yaml``
(cpusvc requests 100m and uses ~0.7 core) under ``loadaware`` and ``default+taints``,
each with the estimate raised to what a workload's pods use and without (the policy's
``estimation: {workloadUsage: false}``), in two shapes of the same waves:

* ``Deployment``: the fixture as it is. kube-scheduler's system-default topology
  spread (which the simulator models under every policy) keeps a ReplicaSet's wave
  apart by itself, so the raise has little left to do;
* ``Job``: the two services' waves as pods no default spread keeps apart (batch waves,
  bare pods, or a scheduler profile without the default constraints): the setting in
  which a wave of pods estimated at their 100m request piles onto the coolest node.

One Markdown row per shape and policy: throttled CPU-minutes and OOM events summed over
the seeds, without and with the raise, the seeds the raise made better or worse, and
the pending pod-minutes with it (the raise must not hold pods back).
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make the repository's `app` importable
    sys.path.insert(0, str(ROOT))

from app.policy import DEFAULT_POLICY_YAML  # noqa: E402
from app.simulate.cluster import SimulatedCluster  # noqa: E402
from app.simulate.policies import plan_for  # noqa: E402
from app.simulate.scenario import Scenario, load_scenario  # noqa: E402
from app.simulate.summary import summarise  # noqa: E402

WAVES = ROOT / "tests" / "fixtures" / "simulate" / "crane-style-waves.yaml"
SERVICES = ("cpusvc", "memsvc")  # the waves; the background jobs stay as they are
KINDS = ("Deployment", "Job")
POLICIES = ("loadaware", "default+taints")


def waves(
    kind: str, workload_usage: bool, seed: int, extender_weight: int | None = None
) -> Scenario:
    """crane-style-waves at ``seed``, its services of ``kind``, the raise on or off;
    ``extender_weight``: kube-scheduler's weight of the extender (None: the simulator's
    default, the shipped configurations' weight)."""
    scenario = load_scenario(str(WAVES))
    services = [
        w.model_copy(update={"kind": kind}) if w.name in SERVICES else w for w in scenario.workloads
    ]
    update: dict[str, Any] = {"seed": seed, "workloads": services}
    if extender_weight is not None:
        update["scheduler"] = scenario.scheduler.model_copy(
            update={"extender_weight": extender_weight}
        )
    if not workload_usage:
        policy: dict[str, Any] = yaml.safe_load(DEFAULT_POLICY_YAML)
        policy["spec"]["estimation"] = {"workloadUsage": False}
        update["policy"] = policy
    return scenario.model_copy(update=update)


@dataclass(frozen=True)
class Harm:
    throttled_cpu_minutes: float
    oom_events: int
    pending_pod_minutes: float

    @property
    def total(self) -> float:
        return self.throttled_cpu_minutes + self.oom_events


def measure(
    kind: str, policy: str, workload_usage: bool, seed: int, extender_weight: int | None = None
) -> Harm:
    cluster = SimulatedCluster(waves(kind, workload_usage, seed, extender_weight), plan_for(policy))
    summary = summarise(cluster.simulate())
    return Harm(summary.throttled_cpu_minutes, summary.oom_events, summary.pending_pod_minutes)


def _measure(job: tuple[str, str, bool, int, int | None]) -> Harm:
    return measure(*job)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20, help="seeds 1..N (default 20)")
    parser.add_argument("--jobs", type=int, default=1, help="processes (default 1)")
    parser.add_argument(
        "--extender-weight",
        type=int,
        default=None,
        help="kube-scheduler's weight of the extender (default: the simulator's)",
    )
    args = parser.parse_args()
    seeds = range(1, args.seeds + 1)
    weight = args.extender_weight
    jobs = [
        (k, p, on, s, weight)
        for k in KINDS
        for p in POLICIES
        for on in (False, True)
        for s in seeds
    ]
    with ProcessPoolExecutor(max(1, args.jobs)) as pool:
        results = dict(zip(jobs, pool.map(_measure, jobs), strict=True))
    print(
        f"| services as | policy | throttled CPU-min without -> with (seeds 1-{args.seeds}) "
        "| OOM events without -> with | seeds better / worse | pending pod-min with |"
    )
    print("|---|---|---|---|---|---|")
    for kind in KINDS:
        for policy in POLICIES:
            off = [results[(kind, policy, False, s, weight)] for s in seeds]
            on = [results[(kind, policy, True, s, weight)] for s in seeds]
            better = sum(b.total < a.total - 1e-9 for a, b in zip(off, on, strict=True))
            worse = sum(b.total > a.total + 1e-9 for a, b in zip(off, on, strict=True))
            print(
                f"| {kind} | {policy} "
                f"| {sum(h.throttled_cpu_minutes for h in off):.2f} -> "
                f"{sum(h.throttled_cpu_minutes for h in on):.2f} "
                f"| {sum(h.oom_events for h in off)} -> {sum(h.oom_events for h in on)} "
                f"| {better} / {worse} | {sum(h.pending_pod_minutes for h in on):.1f} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
