"""crane-scheduler's design experiments, built in: services that request little and
use a lot, scaled up in waves on nodes with uneven background load. Over 5 seeds the
default scheduler overloads nodes, and crane and loadaware do not."""

from __future__ import annotations

import pytest

from app.simulate.cluster import Placement, SimulatedCluster
from app.simulate.policies import plan_for
from app.simulate.scenario import Scenario, load_scenario
from app.simulate.summary import Summary, summarise

SEEDS = (1, 2, 3, 4, 5)


def run(scenario: Scenario, policy: str, seed: int) -> Summary:
    seeded = scenario.model_copy(update={"seed": seed})
    return summarise(SimulatedCluster(seeded, plan_for(policy)).simulate())


def harm(summary: Summary) -> float:
    return summary.throttled_cpu_minutes + summary.oom_events


@pytest.mark.parametrize("name", ["memory-heavy", "cpu-heavy"])
@pytest.mark.parametrize("seed", SEEDS)
def test_default_overloads_nodes_and_the_load_aware_schedulers_do_not(
    name: str, seed: int
) -> None:
    scenario = load_scenario(name)
    default, crane, loadaware = (run(scenario, p, seed) for p in ("default", "crane", "loadaware"))
    assert harm(default) > 0, f"{name} seed {seed}: the default scheduler overloaded nothing"
    assert harm(crane) == 0
    assert harm(loadaware) == 0
    assert loadaware.pending_pod_minutes <= crane.pending_pod_minutes
    assert loadaware.pending_at_end == crane.pending_at_end == 0


@pytest.mark.parametrize(("name", "metric"), [("memory-heavy", "mem"), ("cpu-heavy", "cpu")])
def test_crane_stops_at_its_load_predicate(name: str, metric: str) -> None:
    cluster = SimulatedCluster(load_scenario(name), plan_for("crane"))
    reasons: set[str] = set()

    def note(sim: SimulatedCluster, _placement: Placement) -> None:
        assert sim.load_filter is not None
        reasons.update(load.reason for load in sim.load_filter.loads if load and load.reason)

    cluster.on_placement = note
    cluster.simulate()
    assert f"Load[{metric}_usage_avg_5m] is too high (> 0.65)" in reasons
