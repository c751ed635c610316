"""A crane-style experiment the rules were not written on (``mixed-waves``: uneven
background, a memory-heavy and a CPU-heavy service scaled up in alternating waves, 10
nodes of 8 CPU). On every one of seeds 1-10, loadaware as it ships leaves no more
node-minutes above the limits (CPU and memory together) than crane as it ships, holds
no more pods back and overloads nothing; over the ten, its median node-minutes above
each limit are no higher. (Per resource one seed is not: on seed 3 one node holds
memory at 65.4 % for 194.5 minutes, against crane's 194.0, while crane runs a node at
115 % CPU.)"""

from __future__ import annotations

import statistics
from functools import cache
from pathlib import Path

import pytest

from app.simulate.cluster import SimulatedCluster
from app.simulate.policies import plan_for
from app.simulate.scenario import load_scenario
from app.simulate.summary import Summary, summarise

SEEDS = range(1, 11)
# A fixture, not a built-in: beside crane and default the descheduler still adds harm on
# some of its seeds (crane's later waves land where an eviction made room), which the
# built-in no-harm test would hold against it; beside loadaware it adds none
# (tests/simulate/test_no_harm.py).
MIXED_WAVES = Path(__file__).parents[1] / "fixtures" / "simulate" / "mixed-waves.yaml"


@cache
def run(policy: str, seed: int) -> Summary:
    scenario = load_scenario(str(MIXED_WAVES)).model_copy(update={"seed": seed})
    return summarise(SimulatedCluster(scenario, plan_for(policy)).simulate())


@pytest.mark.parametrize("seed", SEEDS)
def test_loadaware_runs_no_hotter_than_crane_and_holds_no_more_pods_back(seed: int) -> None:
    crane, loadaware = run("crane", seed), run("loadaware", seed)
    assert above(loadaware) <= above(crane)
    assert loadaware.pending_pod_minutes <= crane.pending_pod_minutes
    assert loadaware.throttled_cpu_minutes == loadaware.oom_events == 0


def above(summary: Summary) -> float:
    return summary.cpu_node_minutes_above + summary.memory_node_minutes_above


def test_over_the_ten_seeds_neither_limit_is_passed_longer_than_under_crane() -> None:
    for resource in ("cpu_node_minutes_above", "memory_node_minutes_above"):
        crane, loadaware = (
            statistics.median(getattr(run(policy, seed), resource) for seed in SEEDS)
            for policy in ("crane", "loadaware")
        )
        assert loadaware <= crane, resource
