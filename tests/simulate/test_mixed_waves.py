"""A crane-style experiment the rules were not written on (``mixed-waves``: uneven
background, a memory-heavy and a CPU-heavy service scaled up in alternating waves, 10
nodes of 8 CPU): on every one of seeds 1-10 loadaware as it ships leaves no more
node-minutes above the limits than crane as it ships and overloads nothing.

Since kube-scheduler's system-default topology spread is modelled under every policy
(issue 40), this holds because of the shipped ``extenderWeight`` 8 (issue 45): the
spread scores up to 200 points, as much as the extender's whole answer at the 2 shipped
before (0..10 x 10 x 2), which it cancelled; loadaware then ran hotter than crane on 5
of the 10 seeds (up to 1.31x) and held pods back on every one (up to 239 pending
pod-minutes). At 8 it runs cooler than crane on all ten (606-1,084 node-minutes against
crane's 871-1,423, seeds 1-10) and holds back a few pods for minutes while a wave
arrives (at most 6 pod-minutes a seed; crane none), which is what the filter is for."""

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
def test_loadaware_overloads_nothing_and_runs_no_hotter_than_crane(seed: int) -> None:
    crane, loadaware = run("crane", seed), run("loadaware", seed)
    assert loadaware.throttled_cpu_minutes == loadaware.oom_events == 0
    assert above(loadaware) <= above(crane), seed
    # Held back while a wave arrives: a few pods for minutes (at most 6 pod-minutes a
    # seed measured), never the hundreds the weight of 2 held back.
    assert crane.pending_pod_minutes == 0.0, seed
    assert loadaware.pending_pod_minutes <= 10.0, seed
    assert loadaware.pending_at_end == 0, seed


def above(summary: Summary) -> float:
    return summary.cpu_node_minutes_above + summary.memory_node_minutes_above


def test_over_the_ten_seeds_neither_limit_is_passed_longer_than_under_crane() -> None:
    for resource in ("cpu_node_minutes_above", "memory_node_minutes_above"):
        crane, loadaware = (
            statistics.median(getattr(run(policy, seed), resource) for seed in SEEDS)
            for policy in ("crane", "loadaware")
        )
        assert loadaware <= crane, resource
