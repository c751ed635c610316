"""The loadaware policy: the production burst estimate feeds the load filter."""

from __future__ import annotations

from typing import Any

import numpy as np

from app.simulate.cluster import Run, SimulatedCluster
from app.simulate.estimation import BurstEstimate
from app.simulate.policies import plan_for
from app.simulate.scenario import load_scenario
from app.simulate.summary import summarise
from tests.simulate.scenarios import load


def burst(estimation: dict[str, Any] | None = None, at: str = "20m") -> dict[str, Any]:
    """6 idle nodes, then 60 pods in one minute that request 100m and use 1 CPU each."""
    document: dict[str, Any] = {
        "name": "burst",
        "duration": "30m",
        "step": "30s",
        "nodes": [{"name": "n", "count": 6, "cpu": 8, "memory": "32Gi"}],
        "workloads": [
            {
                "name": "burst",
                "replicas": 60,
                "requests": {"cpu": "100m", "memory": "256Mi"},
                "limits": {"cpu": "1", "memory": "512Mi"},
                "usage": {"profile": "constant", "cpu": "1", "memory": "256Mi"},
                "arrival": {"at": at, "over": "1m"},
            }
        ],
    }
    if estimation is not None:
        document["policy"] = {
            "apiVersion": "scheduler.policy.crane.io/v1alpha1",
            "kind": "DynamicSchedulerPolicy",
            "spec": {
                "syncPolicy": [
                    {"name": "cpu_usage_avg_5m", "period": "3m"},
                    {"name": "mem_usage_avg_5m", "period": "3m"},
                ],
                "predicate": [{"name": "cpu_usage_avg_5m", "maxLimitPecent": 0.65}],
                "priority": [{"name": "cpu_usage_avg_5m", "weight": 1}],
                "estimation": estimation,
            },
        }
    return document


def run(document: dict[str, Any], policy: str) -> tuple[SimulatedCluster, Run]:
    cluster = SimulatedCluster(load(document), plan_for(policy))
    return cluster, cluster.simulate()


def test_on_the_builtin_burst_the_estimate_spreads_what_crane_piles_up() -> None:
    # Web and batch load the nodes unevenly; 100 pods that request 200m and use 1 CPU
    # arrive within a minute, faster than the samples can show them.
    scenario = load_scenario("burst")
    crane = summarise(SimulatedCluster(scenario, plan_for("crane")).simulate())
    loadaware = summarise(SimulatedCluster(scenario, plan_for("loadaware")).simulate())
    assert loadaware.cpu_spread < crane.cpu_spread
    assert loadaware.cpu_peak < crane.cpu_peak
    assert loadaware.throttled_cpu_minutes < crane.throttled_cpu_minutes


def test_the_estimate_is_the_production_rule_for_pods_no_sample_covers() -> None:
    """A pod counts until a sample taken coveredAfter (5m) after its binding, for at most
    maxAge (5m); pods bound in the step of a sync (the same instant as the sample) count."""
    # Released at 21m, a sync step (every 3m): the first pods share the sample's instant.
    cluster = SimulatedCluster(load(burst(at="21m")), plan_for("loadaware"))
    estimate = cluster.estimate
    assert isinstance(estimate, BurstEstimate)
    seen: list[tuple[float, float]] = []
    ties: list[int] = []

    def check(sim: SimulatedCluster, placement: Any) -> None:
        t_s = placement.t_s
        node = placement.node
        samples = sim.state.pipeline.freshest_sample_s(node)
        sample_s = max(samples.values()) if samples else -np.inf
        since = [
            slot
            for slot in np.flatnonzero(sim.state.node_of == node).tolist()
            if sample_s - sim.state.bound_at_s[slot] < 300.0
            and t_s < sim.state.bound_at_s[slot] + 300.0
        ]
        ties.extend(slot for slot in since if sim.state.bound_at_s[slot] == sample_s)
        unsampled = estimate.unsampled(node, t_s) or {}
        # Limit 1 CPU x the default factor 0.85, over 8 CPU, per pod not yet sampled.
        seen.append((unsampled.get("cpu", 0.0), len(since) * 0.85 / 8))

    cluster.on_placement = check
    cluster.simulate()
    assert any(expected > 0 for _, expected in seen)
    assert ties, "no pod was bound at the instant of its node's sample: the tie went untested"
    for got, expected in seen:
        assert abs(got - expected) < 1e-9
