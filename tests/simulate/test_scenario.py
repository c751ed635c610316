"""Scenario files: the built-ins load, and bad input names the field."""

from __future__ import annotations

from typing import Any

import pytest

from app.simulate.profiles import base_usage, creation_times_s
from app.simulate.scenario import ScenarioError, builtin_names, load_scenario
from tests.simulate.scenarios import load, small


def test_the_builtin_scenarios_load() -> None:
    names = builtin_names()
    assert names == [
        "burst",
        "cpu-heavy",
        "diurnal-trough",
        "drifting-hot-spot",
        "evenly-busy",
        "memory-heavy",
        "small-pods-hot-spot",
        "thousand-nodes",
    ]
    for name in names:
        assert load_scenario(name).name == name


def with_workload_field(field: str, value: Any) -> dict[str, Any]:
    document = small()
    document["workloads"][0][field] = value
    return document


@pytest.mark.parametrize(
    ("document", "named"),
    [
        (small(duration=30), "duration"),
        (small(step="banana"), "step"),
        (small(nodes=[]), "nodes"),
        (small(nodes=[{"name": "n", "count": 1, "cpu": "lots", "memory": "1Gi"}]), "nodes.0.cpu"),
        (with_workload_field("replicas", -1), "workloads.0.replicas"),
        (with_workload_field("usage", {"profile": "wavy"}), "workloads.0.usage"),
        (with_workload_field("pdb", {}), "minAvailable and maxUnavailable"),
        (small(metrics={"scrapeInterval": "45s"}), "metrics.scrapeInterval"),
        (small(surprise=1), "surprise"),
        (small(policy={"apiVersion": "x"}), "policy"),
        # Counts a file can name but no machine can hold: refused at load, before the
        # loader builds a name per node (a fuzzed count of 10**12 took 23 GB and the
        # OOM killer).
        (small(nodes=[{"name": "n", "count": 10**12, "cpu": 1, "memory": "1Gi"}]), "nodes.0.count"),
        (
            small(nodes=[{"name": n, "count": 60_000, "cpu": 1, "memory": "1Gi"} for n in "ab"]),
            "120,000 nodes in all",
        ),
        (with_workload_field("replicas", 10**12), "workloads.0.replicas"),
    ],
)
def test_bad_scenarios_are_rejected_naming_the_field(document: dict[str, Any], named: str) -> None:
    with pytest.raises(ScenarioError, match=named.replace(".", r"\.")):
        load(document)


def test_a_policy_metric_without_a_simulated_rule_is_rejected() -> None:
    policy = {
        "apiVersion": "scheduler.policy.crane.io/v1alpha1",
        "kind": "DynamicSchedulerPolicy",
        "spec": {
            "syncPolicy": [{"name": "gpu_usage_avg_5m", "period": "3m"}],
            "predicate": [{"name": "gpu_usage_avg_5m", "maxLimitPecent": 0.65}],
            "priority": [],
            "hotValue": [],
        },
    }
    with pytest.raises(ScenarioError, match="gpu_usage_avg_5m"):
        load(small(policy=policy))


def policy_limiting_cpu_to(fraction: float) -> dict[str, Any]:
    return {
        "apiVersion": "scheduler.policy.crane.io/v1alpha1",
        "kind": "DynamicSchedulerPolicy",
        "spec": {
            "syncPolicy": [{"name": "cpu_usage_avg_5m", "period": "3m"}],
            "predicate": [{"name": "cpu_usage_avg_5m", "maxLimitPecent": fraction}],
            "priority": [{"name": "cpu_usage_avg_5m", "weight": 1.0}],
            "hotValue": [],
        },
    }


def test_each_policy_document_gets_its_own_policy_under_one_scenario_name() -> None:
    """A scenario's policy is parsed once per scenario name and document: scenarios
    named alike with other policies (or none) still get their own."""
    limits = {
        fraction: load(small(policy=policy_limiting_cpu_to(fraction))).scheduling_policy()
        for fraction in (0.5, 0.7, 0.5)
    }
    assert dict(limits[0.5].limits) == {"cpu_usage_avg_5m": 0.5}
    assert dict(limits[0.7].limits) == {"cpu_usage_avg_5m": 0.7}
    assert len(load(small()).scheduling_policy().spec.sync_policy) == 6  # crane's default
    assert load(small()).scheduling_policy() is load(small()).scheduling_policy()


def test_an_unknown_name_lists_the_builtin_scenarios() -> None:
    with pytest.raises(ScenarioError, match="burst"):
        load_scenario("no-such-scenario")


def test_replicas_arrive_evenly_then_scale_ups_add_the_difference() -> None:
    document = small()
    document["workloads"][0].update(
        replicas=2, arrival={"at": "1m", "over": "2m"}, scaleUps=[{"at": "10m", "replicas": 4}]
    )
    workload = load(document).workloads[0]
    assert creation_times_s(workload) == [60.0, 120.0, 600.0, 600.0]


@pytest.mark.parametrize(
    ("usage", "t_s", "expected"),
    [
        ({"profile": "constant", "cpu": "1", "memory": "1Gi"}, 99.0, (1.0, 2.0**30)),
        (
            {"profile": "diurnal", "cpu": "2", "memory": "1Gi", "amplitude": 0.5, "peakAt": "1h"},
            3600.0,
            (3.0, 2.0**30),
        ),
        (
            {
                "profile": "growing",
                "start": {"cpu": "1"},
                "end": {"cpu": "3"},
                "from": "1h",
                "until": "2h",
            },
            5400.0,
            (2.0, 0.0),
        ),
        (
            {
                "profile": "points",
                "points": [
                    {"at": "0s", "cpu": "0", "memory": "0"},
                    {"at": "100s", "cpu": "1", "memory": "100"},
                ],
            },
            25.0,
            (0.25, 25.0),
        ),
    ],
)
def test_usage_profiles(usage: dict[str, Any], t_s: float, expected: tuple[float, float]) -> None:
    document = small()
    document["workloads"][0]["usage"] = usage
    workload = load(document).workloads[0]
    assert base_usage(workload.usage, t_s) == pytest.approx(expected)
