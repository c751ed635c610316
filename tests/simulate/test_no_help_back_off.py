"""Where no eviction can help, the descheduler makes at most one round of evictions
after the first judgement that its moves did not help, and adds no harm (issue 44).

Three small fixtures under tests/fixtures/simulate/, none a built-in and none the
back-off rule was tuned to: an evenly busy cluster whose pods burst at random
(``noisy-even``), a cluster hot everywhere (``hot-everywhere``) and a hot spot made of
pods nobody may evict (``unevictable-hot-spot``), beside each scheduler the simulator
runs a descheduler with, on the issue's seeds 1-10 (``loadaware simulate FILE --seeds
10`` gives the numbers docs/troubleshooting.md quotes).

A round with evictions is counted after a non-helping judgement when it comes later
than the first move the descheduler's state judged "no effect" or "backfired"
(``PlannerRebalancer.moves``: the judged moves its back-off, app/rebalance/backoff.py,
reads). The harm is throttled CPU-minutes plus OOM events, as test_no_harm counts it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.simulate.cluster import Run, SimulatedCluster
from app.simulate.descheduling import PlannerRebalancer
from app.simulate.policies import plan_for
from app.simulate.scenario import load_scenario
from app.simulate.summary import summarise

FIXTURES = Path(__file__).parents[2] / "tests" / "fixtures" / "simulate"
SCENARIOS = ("noisy-even", "hot-everywhere", "unevictable-hot-spot")
BASES = ("default", "crane", "loadaware", "default+taints")
SEEDS = tuple(range(1, 11))  # the seeds 1-10


def simulated(name: str, policy: str, seed: int) -> tuple[SimulatedCluster, Run]:
    scenario = load_scenario(str(FIXTURES / f"{name}.yaml")).model_copy(update={"seed": seed})
    cluster = SimulatedCluster(scenario, plan_for(policy))
    return cluster, cluster.simulate()


def harm(run: Run) -> float:
    summary = summarise(run)
    return summary.throttled_cpu_minutes + summary.oom_events


def rounds_after_first_miss(cluster: SimulatedCluster, run: Run) -> int:
    """The descheduler's rounds with evictions after its first non-helping judgement."""
    rebalancer = cluster.rebalancer
    assert isinstance(rebalancer, PlannerRebalancer)
    epoch_s = cluster.state.pipeline.epoch_s
    misses = [
        (move.judged_at_s or 0.0) - epoch_s
        for move in rebalancer.moves.judged
        if move.outcome != "helped"
    ]
    if not misses:
        return 0
    first_s = min(misses)
    return len({e.t_s for e in run.evictions if e.by == "descheduler" and e.t_s > first_s})


def test_a_miss_is_counted_from_its_judgement() -> None:
    """The count reads the judged moves: a run whose judged moves are all 'helped' has
    none after a miss, whatever it evicted (the count is not just 'no evictions')."""
    cluster, run = simulated("unevictable-hot-spot", "loadaware+desched", 1)
    assert run.evictions, "the unevictable hot spot evicted nothing beside loadaware"
    assert isinstance(cluster.rebalancer, PlannerRebalancer)
    assert cluster.rebalancer.moves.judged, "its moves were never judged"
    assert rounds_after_first_miss(cluster, run) == 0


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("name", SCENARIOS)
def test_where_no_eviction_can_help_it_stops_and_adds_no_harm(
    name: str, base: str, seed: int
) -> None:
    cluster, with_it = simulated(name, f"{base}+desched", seed)
    assert rounds_after_first_miss(cluster, with_it) <= 1, (name, base, seed)
    assert summarise(with_it).pods_evicted_repeatedly == 0, (name, base, seed)
    if with_it.evictions:
        _, without = simulated(name, base, seed)
        assert harm(with_it) <= harm(without) + 1e-9, (name, base, seed)
