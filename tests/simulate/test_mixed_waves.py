"""A crane-style experiment the rules were not written on (``mixed-waves``: uneven
background, a memory-heavy and a CPU-heavy service scaled up in alternating waves, 10
nodes of 8 CPU). Before kube-scheduler's system-default topology spread was modelled
under every policy (issue 40), on every one of seeds 1-10 loadaware as it ships left no
more node-minutes above the limits than crane as it ships, held no more pods back and
overloaded nothing.

A known gap since (``KNOWN_HOTTER``): the spread scores at weight 2 (up to 200 points),
as much as the extender's answer at the shipped ``extenderWeight`` 2 (0..10 x 10 x 2),
so it cancels the extender's preference for the coolest node; crane's plugin scores at
weight 3 (up to 300) and keeps its own. loadaware now runs hotter than crane on 5 of
the 10 seeds (up to 1.31x, seed 1) and holds pods back on every one (2.5 to 239
pending pod-minutes, against none), though it still overloads nothing and its medians
are crane's within 1 %. Raising ``extenderWeight`` closes part of it (seed 1: 1,478
node-minutes at 2, 1,156 at 5, crane 1,125): a decision for the shipped scheduler
configurations, not made here. Pinned, so that a fix shows."""

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


KNOWN_HOTTER = frozenset({1, 3, 4, 6, 7})  # the seeds loadaware now runs hotter than crane


@pytest.mark.parametrize("seed", SEEDS)
def test_loadaware_overloads_nothing_and_runs_hotter_than_crane_only_where_known(
    seed: int,
) -> None:
    crane, loadaware = run("crane", seed), run("loadaware", seed)
    assert loadaware.throttled_cpu_minutes == loadaware.oom_events == 0
    if seed in KNOWN_HOTTER:
        assert above(crane) < above(loadaware) <= 1.35 * above(crane), seed
    else:
        assert above(loadaware) <= above(crane), seed
    # Held back: a known gap on every seed, pinned at what it measures.
    assert crane.pending_pod_minutes == 0.0 < loadaware.pending_pod_minutes <= 240.0, seed


def above(summary: Summary) -> float:
    return summary.cpu_node_minutes_above + summary.memory_node_minutes_above


def test_over_the_ten_seeds_neither_limit_is_passed_longer_than_under_crane() -> None:
    for resource in ("cpu_node_minutes_above", "memory_node_minutes_above"):
        crane, loadaware = (
            statistics.median(getattr(run(policy, seed), resource) for seed in SEEDS)
            for policy in ("crane", "loadaware")
        )
        # within 1 % since the spread; memory within 3 % since a bound pod's CPU estimate
        # is at most what its workload uses (issue 43: median 458 against crane's 445 at
        # weight 2, where it was within 1 %; the trade for no pod held by the filter on
        # nodes with room at a step rise, docs/tuning.md). Open: win it back.
        limit = 1.03 if resource == "memory_node_minutes_above" else 1.01
        assert loadaware <= crane * limit, resource
